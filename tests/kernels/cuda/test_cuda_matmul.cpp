// kernels/cuda matmuls against the CPU reference: the weights dequantized by
// kernels/cpu dequantize_row, then the CPU f32 matmul (kernels/cpu matmul with
// f32 weights: no activation quantization). Every weight type, both paths
// (warp-per-row GEMV, tiled GEMM), f32 and f16 activations, a padded row
// stride; and the cuBLAS F16/BF16 GEMM. Tolerances scale with sum |w x|:
// f32 sums in another order (5e-5), cuBLAS on tensor cores (1e-3).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/quant_blocks.hpp"  // kMxfp4
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cuda/blas.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/matmul.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace troupe::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::DeviceBuffer;

struct Problem {
  std::vector<uint8_t> w;  // out rows, `stride` bytes apart
  std::vector<float> wf;   // dequantized weights [out][in]
  std::vector<float> x;    // activations [n][in], already rounded to the activation type
  int64_t stride = 0;
};

Problem make_problem(DType type, int64_t in, int64_t out, int64_t n, int64_t pad, DType x_type, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Problem p;
  p.stride = row_bytes(type, in) + pad;
  p.w.assign(static_cast<size_t>(p.stride * out), 0xcd);
  p.wf.resize(static_cast<size_t>(in * out));
  std::vector<float> raw(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    for (auto& v : raw) v = dist(rng);
    cpu::quantize_row_reference(type, raw.data(), p.w.data() + o * p.stride, in);
    cpu::dequantize_row(type, p.w.data() + o * p.stride, p.wf.data() + o * in, in);
  }
  p.x.resize(static_cast<size_t>(in * n));
  for (auto& v : p.x) {
    v = dist(rng) * (dist(rng) > 0.9f ? 4.0f : 1.0f);  // some outliers
    if (x_type == DType::f16) v = cpu::fp16_to_fp32(cpu::fp32_to_fp16(v));
    if (x_type == DType::bf16) v = cpu::bf16_to_fp32(cpu::fp32_to_bf16(v));
  }
  return p;
}

// CPU reference and the bound: y_ref from the CPU f32 matmul, bound[t][o] = sum |w x|.
void reference(const Problem& p, int64_t in, int64_t out, int64_t n, std::vector<float>* y, std::vector<double>* bound) {
  y->assign(static_cast<size_t>(n * out), 0.0f);
  cpu::matmul(DType::f32, p.wf.data(), in, out, p.x.data(), n, y->data(), nullptr);
  bound->assign(y->size(), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0.0;
      for (int64_t i = 0; i < in; ++i) s += std::fabs(double{p.wf[o * in + i]} * p.x[t * in + i]);
      (*bound)[t * out + o] = s;
    }
}

std::vector<uint16_t> to_half_bits(const std::vector<float>& x, DType type) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = type == DType::f16 ? cpu::fp32_to_fp16(x[i]) : cpu::fp32_to_bf16(x[i]);
  return h;
}

struct Case {
  DType w_type;
  DType x_type;
  MatmulPath path;
  int64_t n_tokens;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(to_string(c.w_type)) + "_x" + std::string(to_string(c.x_type)) +
         (c.path == MatmulPath::gemv ? "_gemv" : "_tiled") + "_t" + std::to_string(c.n_tokens);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (DType w : {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::q8_0, DType::q4_k, DType::q6_k, DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl,
                  DType::iq4_xs, cpu::kMxfp4}) {
    for (int64_t n : {1, 3, 8, 20}) cases.push_back({w, DType::f32, MatmulPath::gemv, n});  // 20: chunks of 8
    for (int64_t n : {1, 9, 67}) cases.push_back({w, DType::f32, MatmulPath::tiled, n});
    cases.push_back({w, DType::f16, MatmulPath::gemv, 5});
    cases.push_back({w, DType::f16, MatmulPath::tiled, 33});
  }
  return cases;
}

class CudaMatmul : public CudaTest, public ::testing::WithParamInterface<Case> {};

TEST_P(CudaMatmul, MatchesCpuDequantizeThenMatmul) {
  const Case c = GetParam();
  const int64_t in = 512, out = 70;  // out: not a multiple of 8 rows per GEMV block nor of the 64-row tile
  const int64_t pad = c.w_type == DType::f32 ? 8 : 6;
  const Problem p = make_problem(c.w_type, in, out, c.n_tokens, pad, c.x_type, 99u + static_cast<uint32_t>(c.n_tokens));
  std::vector<float> ref;
  std::vector<double> bound;
  reference(p, in, out, c.n_tokens, &ref, &bound);

  DeviceBuffer<uint8_t> d_w(p.w);
  DeviceBuffer<float> d_y(static_cast<size_t>(c.n_tokens * out));
  DeviceBuffer<float> d_xf(c.x_type == DType::f32 ? p.x : std::vector<float>{});
  DeviceBuffer<uint16_t> d_xh(c.x_type == DType::f16 ? to_half_bits(p.x, DType::f16) : std::vector<uint16_t>{});
  ASSERT_TRUE(d_w.ok() && d_y.ok() && d_xf.ok() && d_xh.ok());
  const void* x = c.x_type == DType::f32 ? static_cast<const void*>(d_xf.get()) : d_xh.get();
  ASSERT_OK(matmul_with_path(c.path, c.w_type, d_w.get(), p.stride, in, out, x, c.x_type, c.n_tokens, d_y.get(),
                             stream_));
  sync();
  const auto y = d_y.to_host();
  ASSERT_EQ(y.size(), ref.size());
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t o = 0; o < out; ++o) {
      const size_t k = static_cast<size_t>(t * out + o);
      ASSERT_NEAR(y[k], ref[k], 5e-5 * bound[k] + 1e-6) << "token " << t << " row " << o;
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaMatmul, ::testing::ValuesIn(all_cases()), case_name);

class CudaMatmulDispatch : public CudaTest {};

// matmul() picks the GEMV up to kGemvMaxTokens and the tiled GEMM beyond: both agree with the reference.
TEST_F(CudaMatmulDispatch, DefaultPathMatchesReferenceAroundTheSwitch) {
  const int64_t in = 256, out = 33;
  for (int64_t n : {kGemvMaxTokens, kGemvMaxTokens + 1}) {
    const Problem p = make_problem(DType::q4_k, in, out, n, 0, DType::f32, 5u);
    std::vector<float> ref;
    std::vector<double> bound;
    reference(p, in, out, n, &ref, &bound);
    DeviceBuffer<uint8_t> d_w(p.w);
    DeviceBuffer<float> d_x(p.x), d_y(static_cast<size_t>(n * out));
    ASSERT_TRUE(d_w.ok() && d_x.ok() && d_y.ok());
    ASSERT_OK(matmul(DType::q4_k, d_w.get(), 0, in, out, d_x.get(), DType::f32, n, d_y.get(), stream_));
    sync();
    const auto y = d_y.to_host();
    ASSERT_EQ(y.size(), ref.size());
    for (size_t k = 0; k < y.size(); ++k) ASSERT_NEAR(y[k], ref[k], 5e-5 * bound[k] + 1e-6) << "n " << n << " k " << k;
  }
}

class CudaCublas : public CudaTest {};

TEST_F(CudaCublas, F16AndBf16GemmMatchCpuReference) {
  auto blas = CublasGemm::create();
  ASSERT_TRUE(blas.ok()) << blas.status().to_string();
  for (DType type : {DType::f16, DType::bf16}) {
    for (int64_t n : {1, 5, 64}) {
      for (int64_t pad : {0, 32}) {  // pad: lda > in
        SCOPED_TRACE(std::string(to_string(type)) + " n " + std::to_string(n) + " pad " + std::to_string(pad));
        const int64_t in = 256, out = 96;
        const Problem p = make_problem(type, in, out, n, pad, type, 17u + static_cast<uint32_t>(n));
        std::vector<float> ref;
        std::vector<double> bound;
        reference(p, in, out, n, &ref, &bound);
        DeviceBuffer<uint8_t> d_w(p.w);
        DeviceBuffer<float> d_xf(p.x), d_y(static_cast<size_t>(n * out));
        DeviceBuffer<uint16_t> d_xh(static_cast<size_t>(n * in));
        ASSERT_TRUE(d_w.ok() && d_xf.ok() && d_y.ok() && d_xh.ok());
        // The activations go through the conversion kernel, as a worker would do it.
        ASSERT_OK(convert_from_f32(d_xf.get(), type, d_xh.get(), n * in, stream_));
        ASSERT_OK((*blas)->gemm(type, d_w.get(), p.stride, in, out, d_xh.get(), n, d_y.get(), stream_));
        sync();
        const auto y = d_y.to_host();
        ASSERT_EQ(y.size(), ref.size());
        for (size_t k = 0; k < y.size(); ++k) ASSERT_NEAR(y[k], ref[k], 1e-3 * bound[k] + 1e-5) << k;
      }
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cuda
