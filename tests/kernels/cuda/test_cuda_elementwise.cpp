// kernels/cuda elementwise ops against kernels/cpu: embedding gather for every
// weight type, RMSNorm, RoPE (normal and NeoX), SiLU-and-mul, add, and the
// f32 -> f16/bf16 conversions. Label gpu: skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/quant_blocks.hpp"  // kMxfp4
#include "kernels/cpu/quantize.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace troupe::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::DeviceBuffer;

std::vector<float> rand_vec(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

class CudaElementwise : public CudaTest {};

TEST_F(CudaElementwise, EmbeddingEveryWeightTypeMatchesCpuDequantize) {
  const DType types[] = {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q4_1, DType::q5_0,
                         DType::q5_1, DType::q8_0, DType::q4_k, DType::q6_k, DType::q2_k,
                         DType::q3_k, DType::q5_k, DType::iq4_nl, DType::iq4_xs, cpu::kMxfp4};
  const int64_t vocab = 37, dim = 512;
  const std::vector<int32_t> ids = {0, 36, 5, 5, -1, 37, 20};  // -1 and 37 are out of range: zeros
  for (DType type : types) {
    SCOPED_TRACE(std::string(to_string(type)));
    ASSERT_TRUE(supports_weight_type(type));
    const int64_t rb = row_bytes(type, dim);
    const int64_t stride = rb + 16;  // padded rows: the stride is honoured
    const auto raw = rand_vec(vocab * dim, 7u + static_cast<uint32_t>(type));
    std::vector<uint8_t> table(static_cast<size_t>(stride * vocab), 0xab);
    for (int64_t r = 0; r < vocab; ++r)
      cpu::quantize_row_reference(type, raw.data() + r * dim, table.data() + r * stride, dim);

    DeviceBuffer<uint8_t> d_table(table);
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<float> d_out(ids.size() * dim);
    ASSERT_TRUE(d_table.ok() && d_ids.ok() && d_out.ok());
    ASSERT_OK(embedding(type, d_table.get(), stride, dim, vocab, d_ids.get(), static_cast<int64_t>(ids.size()),
                        d_out.get(), stream_));
    sync();
    const auto out = d_out.to_host();
    ASSERT_EQ(out.size(), ids.size() * dim);
    std::vector<float> ref(static_cast<size_t>(dim));
    for (size_t t = 0; t < ids.size(); ++t) {
      if (ids[t] < 0 || ids[t] >= vocab) {
        std::fill(ref.begin(), ref.end(), 0.0f);
      } else {
        cpu::dequantize_row(type, table.data() + ids[t] * stride, ref.data(), dim);
      }
      for (int64_t i = 0; i < dim; ++i)
        ASSERT_NEAR(out[t * dim + i], ref[i], 1e-6f * (1.0f + std::fabs(ref[i]))) << "token " << t << " elem " << i;
    }
  }
}

TEST_F(CudaElementwise, RmsNormMatchesCpu) {
  const int64_t n = 5, dim = 576;  // dim not a multiple of the block's 256 threads
  const auto x = rand_vec(n * dim, 1), w = rand_vec(dim, 2);
  DeviceBuffer<float> d_x(x), d_w(w), d_out(x.size());
  ASSERT_TRUE(d_x.ok() && d_w.ok() && d_out.ok());
  std::vector<float> ref(x.size());

  ASSERT_OK(rms_norm(d_x.get(), d_w.get(), n, dim, 1e-5f, d_out.get(), stream_));
  sync();
  cpu::rms_norm(x.data(), w.data(), n, dim, 1e-5f, ref.data());
  auto out = d_out.to_host();
  ASSERT_EQ(out.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i]))) << i;

  // No weight, and out aliasing x.
  ASSERT_OK(rms_norm(d_x.get(), nullptr, n, dim, 1e-6f, d_x.get(), stream_));
  sync();
  cpu::rms_norm(x.data(), nullptr, n, dim, 1e-6f, ref.data());
  out = d_x.to_host();
  ASSERT_EQ(out.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i]))) << i;
}

TEST_F(CudaElementwise, RopeNormalAndNeoxMatchCpu) {
  const int64_t n = 7;
  const int heads = 4;
  std::mt19937 rng(3);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (auto& p : pos) p = static_cast<int32_t>(rng() % 8192);
  pos[0] = 0;
  for (int head_dim : {64, 128, 80}) {
    for (bool neox : {false, true}) {
      for (float theta : {10000.0f, 500000.0f}) {
        SCOPED_TRACE("head_dim " + std::to_string(head_dim) + (neox ? " neox" : " normal") + " theta " +
                     std::to_string(theta));
        const auto x = rand_vec(n * heads * head_dim, 4u + static_cast<uint32_t>(head_dim));
        DeviceBuffer<float> d_x(x);
        DeviceBuffer<int32_t> d_pos(pos);
        ASSERT_TRUE(d_x.ok() && d_pos.ok());
        ASSERT_OK(rope(d_x.get(), d_pos.get(), n, heads, head_dim, theta, neox, stream_));
        sync();
        auto ref = x;
        cpu::rope(ref.data(), pos.data(), n, heads, head_dim, theta, neox);
        const auto out = d_x.to_host();
        ASSERT_EQ(out.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-6f * (1.0f + std::fabs(ref[i]))) << i;
      }
    }
  }
}

TEST_F(CudaElementwise, RopeFreqFactorsMatchesCpu) {
  const int64_t n = 37;
  const int heads = 4, head_dim = 64;
  const auto x = rand_vec(n * heads * head_dim, 11);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t * 311);  // past 8192
  std::vector<float> factors(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) factors[static_cast<size_t>(i)] = 1.0f + 31.0f * i / (head_dim / 2 - 1);
  for (bool neox : {false, true}) {
    DeviceBuffer<float> d_x(x), d_f(factors);
    DeviceBuffer<int32_t> d_pos(pos);
    ASSERT_TRUE(d_x.ok() && d_f.ok() && d_pos.ok());
    ASSERT_OK(rope_freq_factors(d_x.get(), d_pos.get(), n, heads, head_dim, 500000.0f, neox, d_f.get(), 0.75f,
                                stream_));
    sync();
    auto ref = x;
    cpu::rope_freq_factors(ref.data(), pos.data(), n, heads, head_dim, 500000.0f, neox, factors.data(), 0.75f);
    const auto out = d_x.to_host();
    ASSERT_EQ(out.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-6f * (1.0f + std::fabs(ref[i]))) << i;
  }
}

TEST_F(CudaElementwise, SiluMulMatchesCpu) {
  const int64_t n = 100003;
  const auto g = rand_vec(n, 5, -12.0f, 12.0f), u = rand_vec(n, 6);
  DeviceBuffer<float> d_g(g), d_u(u), d_out(static_cast<size_t>(n));
  ASSERT_TRUE(d_g.ok() && d_u.ok() && d_out.ok());
  ASSERT_OK(silu_mul(d_g.get(), d_u.get(), n, d_out.get(), stream_));
  sync();
  std::vector<float> ref(static_cast<size_t>(n));
  cpu::silu_mul(g.data(), u.data(), n, ref.data());
  const auto out = d_out.to_host();
  ASSERT_EQ(out.size(), ref.size());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], ref[i], 1e-6f * (1.0f + std::fabs(ref[i]))) << i;

  ASSERT_OK(silu_mul(d_g.get(), d_u.get(), n, d_g.get(), stream_));  // out aliasing gate
  sync();
  const auto aliased = d_g.to_host();
  ASSERT_EQ(aliased.size(), ref.size());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(aliased[i], out[i]) << i;
}

TEST_F(CudaElementwise, AddInplaceIsExact) {
  const int64_t n = 70001;
  const auto y = rand_vec(n, 8), x = rand_vec(n, 9);
  DeviceBuffer<float> d_y(y), d_x(x);
  ASSERT_TRUE(d_y.ok() && d_x.ok());
  ASSERT_OK(add_inplace(d_y.get(), d_x.get(), n, stream_));
  sync();
  auto ref = y;
  cpu::add_inplace(ref.data(), x.data(), n);
  const auto out = d_y.to_host();
  ASSERT_EQ(out.size(), ref.size());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref[i]) << i;
}

TEST_F(CudaElementwise, ConvertToHalfAndBf16RoundsLikeTheCpu) {
  auto x = rand_vec(4099, 10, -70000.0f, 70000.0f);
  const auto small = rand_vec(1000, 11, -1e-6f, 1e-6f);  // half subnormals
  x.insert(x.end(), small.begin(), small.end());
  x.insert(x.end(), {0.0f, -0.0f, 65504.0f, 65520.0f, -1e9f, 1.0f / 3.0f});
  const int64_t n = static_cast<int64_t>(x.size());
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<uint16_t> d_h(x.size()), d_b(x.size());
  ASSERT_TRUE(d_x.ok() && d_h.ok() && d_b.ok());
  ASSERT_OK(convert_from_f32(d_x.get(), DType::f16, d_h.get(), n, stream_));
  ASSERT_OK(convert_from_f32(d_x.get(), DType::bf16, d_b.get(), n, stream_));
  sync();
  const auto h = d_h.to_host(), b = d_b.to_host();
  ASSERT_EQ(h.size(), x.size());
  ASSERT_EQ(b.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], cpu::fp32_to_fp16(x[i])) << "f16 of " << x[i];
    ASSERT_EQ(b[i], cpu::fp32_to_bf16(x[i])) << "bf16 of " << x[i];
  }
}

}  // namespace
}  // namespace troupe::kernels::cuda
