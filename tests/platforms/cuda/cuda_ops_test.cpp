// The cuda platform's parts against the CPU platform's, through the platform's
// own device memory: CudaAllocator (copies, 2-D copies, zero fill, a refused
// allocation), every CudaOps method the models call (per weight type for
// matmul and embedding, both the kernel and the cuBLAS path), and the
// cuda_paged attention backend over two steps of a mixed prefill/decode batch.
// Label gpu: every test skips with the device probe's reason without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quantize.hpp"
#include "platforms/cpu/cpu_attention.hpp"
#include "platforms/cpu/cpu_ops.hpp"
#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_ops.hpp"
#include "tests/platforms/cuda/cuda_test_device.hpp"

namespace troupe::cuda {
namespace {

using testing::download;
using testing::upload;

std::vector<float> rand_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

class CudaPlatformParts : public ::testing::Test {
 protected:
  void SetUp() override {
    TROUPE_SKIP_WITHOUT_GPU();
    auto ctx = CudaContext::for_device(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    ctx_ = *ctx;
    ASSERT_TRUE(ctx_->make_current().ok());
    mem_ = std::make_unique<CudaAllocator>(ctx_);
    ops_ = std::make_unique<CudaOps>(ctx_);
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_TRUE(ctx_->take_error().ok());
    }
  }
  /// Fails the test on an error the ops recorded.
  void expect_no_error() {
    const Status s = ctx_->take_error();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }

  std::shared_ptr<CudaContext> ctx_;
  std::unique_ptr<CudaAllocator> mem_;
  std::unique_ptr<CudaOps> ops_;
  cpu::CpuOps cpu_{nullptr};
};

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << what << " at " << i;
}

TEST_F(CudaPlatformParts, AllocatorCopiesFillsAndRefusesTooMuch) {
  EXPECT_FALSE(mem_->host_addressable());
  EXPECT_EQ(mem_->name(), "cuda:0");
  const int64_t before = mem_->allocated_bytes();
  std::vector<float> a(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  auto d = upload(*mem_, a);
  ASSERT_EQ(d.size(), 12);
  EXPECT_EQ(mem_->allocated_bytes(), before + 48);
  DeviceArray<float> packed;
  ASSERT_TRUE(packed.allocate(*mem_, 9).ok());
  ASSERT_TRUE(mem_->fill_zero(packed.data(), 9 * sizeof(float)).ok());
  // Columns 1..2 of a 4x3 matrix into a packed 4x2 one, device to device.
  ASSERT_TRUE(mem_->copy_2d(packed.data(), 2 * sizeof(float), d.data() + 1, 3 * sizeof(float), 2 * sizeof(float), 4,
                            CopyKind::device_to_device)
                  .ok());
  const auto back = download(*mem_, packed);
  const std::vector<float> want = {1, 2, 4, 5, 7, 8, 10, 11, 0};
  EXPECT_EQ(back, want);
  // A 2-D copy to the host returns with the bytes there.
  std::vector<float> host(4, -1.0f);
  ASSERT_TRUE(mem_->copy_2d(host.data(), sizeof(float), d.data(), 3 * sizeof(float), sizeof(float), 4,
                            CopyKind::device_to_host)
                  .ok());
  EXPECT_EQ(host, (std::vector<float>{0, 3, 6, 9}));
  auto huge = mem_->allocate(int64_t{1} << 50);  // a petabyte: no device has it
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::resource_exhausted) << huge.status().to_string();
  EXPECT_NE(huge.status().message().find("cuda:0"), std::string::npos);
}

TEST_F(CudaPlatformParts, StagedHostArraysAreReusedOnlyWhenEqual) {
  std::vector<int32_t> a = {1, 2, 3}, b = {1, 2, 4};
  auto pa = ctx_->stage(a.data(), 12);
  auto pa2 = ctx_->stage(a.data(), 12);
  auto pb = ctx_->stage(b.data(), 12);
  ASSERT_TRUE(pa.ok() && pa2.ok() && pb.ok());
  EXPECT_EQ(*pa, *pa2);
  EXPECT_NE(*pa, *pb);
  std::vector<int32_t> back(3);
  ASSERT_TRUE(mem_->copy(back.data(), *pb, 12, CopyKind::device_to_host).ok());
  EXPECT_EQ(back, b);
  // More than the ring holds: it grows, and the bytes still arrive.
  std::vector<int32_t> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int32_t>(i * 7);
  auto pbig = ctx_->stage(big.data(), static_cast<int64_t>(big.size() * 4));
  ASSERT_TRUE(pbig.ok()) << pbig.status().to_string();
  std::vector<int32_t> big_back(big.size());
  ASSERT_TRUE(mem_->copy(big_back.data(), *pbig, static_cast<int64_t>(big.size() * 4), CopyKind::device_to_host).ok());
  EXPECT_EQ(big_back, big);
}

// matmul through CudaOps for every weight type, with few tokens (GEMV) and many (tiled
// GEMM, or cuBLAS for f16/bf16), against an fp64 product of the dequantized weights.
TEST_F(CudaPlatformParts, MatmulEveryWeightTypeMatchesTheDequantizedProduct) {
  const int64_t in = 512, out = 96;
  for (const std::string& name : weight_type_names()) {
    DType type = DType::f32;
    for (uint32_t id = 0; id < 256; ++id)
      if (auto tr = dtype_traits(id); tr && tr->name == name) type = static_cast<DType>(id);
    SCOPED_TRACE(name);
    EXPECT_TRUE(ops_->check_weight_type(type).ok());
    const int64_t rb = row_bytes(type, in);
    ASSERT_GT(rb, 0);
    const auto raw = rand_vec(static_cast<size_t>(in * out), 11);
    std::vector<uint8_t> wbytes(static_cast<size_t>(rb * out));
    for (int64_t r = 0; r < out; ++r) kernels::cpu::quantize_row_reference(type, raw.data() + r * in, wbytes.data() + r * rb, in);
    std::vector<float> deq(static_cast<size_t>(in * out));
    for (int64_t r = 0; r < out; ++r) kernels::cpu::dequantize_row(type, wbytes.data() + r * rb, deq.data() + r * in, in);
    auto dw = upload(*mem_, wbytes);
    ASSERT_FALSE(dw.empty());
    WeightTensor w;
    w.name = "w_" + name;
    w.type = type;
    w.n_dims = 2;
    w.ne[0] = in;
    w.ne[1] = out;
    w.data = dw.data();
    w.nbytes = wbytes.size();
    for (int64_t tokens : {int64_t{1}, int64_t{5}, int64_t{40}}) {
      SCOPED_TRACE("tokens " + std::to_string(tokens));
      const auto x = rand_vec(static_cast<size_t>(tokens * in), 5 + static_cast<uint32_t>(tokens));
      auto dx = upload(*mem_, x);
      DeviceArray<float> dy;
      ASSERT_TRUE(dy.allocate(*mem_, tokens * out).ok());
      ops_->matmul(w, dx.data(), tokens, dy.data());
      expect_no_error();
      const auto y = download(*mem_, dy);
      ASSERT_EQ(y.size(), static_cast<size_t>(tokens * out));
      // cuBLAS rounds the activations to the weight type; the kernels use them as f32.
      const bool blas = (type == DType::f16 || type == DType::bf16) && tokens > 8;
      const double rel = !blas ? 1e-5 : type == DType::f16 ? 2e-3 : 1.6e-2;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t o = 0; o < out; ++o) {
          double ref = 0, mag = 0;
          for (int64_t i = 0; i < in; ++i) {
            ref += double{x[t * in + i]} * deq[o * in + i];
            mag += std::fabs(double{x[t * in + i]} * deq[o * in + i]);
          }
          ASSERT_NEAR(y[t * out + o], ref, rel * mag + 1e-6) << "token " << t << " row " << o;
        }
    }
  }
  // A type no kernel reads is refused by check_weight_type, and recorded if used anyway.
  EXPECT_EQ(ops_->check_weight_type(DType::q8_k).code(), StatusCode::not_supported);
}

TEST_F(CudaPlatformParts, MatmulOnAnUnsupportedTypeFailsTheStepNotTheProcess) {
  std::vector<uint8_t> bytes(292 * 4, 0);
  auto dw = upload(*mem_, bytes);
  WeightTensor w;
  w.name = "w_q8_k";
  w.type = DType::q8_k;
  w.ne[0] = 256;
  w.ne[1] = 4;
  w.data = dw.data();
  DeviceArray<float> x, y;
  ASSERT_TRUE(x.allocate(*mem_, 256).ok());
  ASSERT_TRUE(y.allocate(*mem_, 4).ok());
  ops_->matmul(w, x.data(), 1, y.data());
  const Status s = ctx_->take_error();
  EXPECT_EQ(s.code(), StatusCode::not_supported) << s.to_string();
  EXPECT_NE(s.message().find("w_q8_k"), std::string::npos) << s.message();
}

TEST_F(CudaPlatformParts, ElementwiseOpsMatchTheCpuOps) {
  const int64_t T = 7, E = 320, heads = 5, hd = 64;
  const auto x = rand_vec(static_cast<size_t>(T * E), 1), w = rand_vec(static_cast<size_t>(E), 2, 0.5f, 1.5f);
  const auto bias = rand_vec(static_cast<size_t>(E), 3), g = rand_vec(static_cast<size_t>(T * E), 4, -4.0f, 4.0f);
  auto dx = upload(*mem_, x), dw = upload(*mem_, w), db = upload(*mem_, bias), dg = upload(*mem_, g);
  DeviceArray<float> dout;
  ASSERT_TRUE(dout.allocate(*mem_, T * E).ok());
  std::vector<float> ref(x.size());

  ops_->rms_norm(dx.data(), dw.data(), T, E, 1e-5f, dout.data());
  cpu_.rms_norm(x.data(), w.data(), T, E, 1e-5f, ref.data());
  expect_near_all(download(*mem_, dout), ref, 1e-5f, "rms_norm");

  ops_->layer_norm(dx.data(), dw.data(), db.data(), T, E, 1e-12f, dout.data());
  cpu_.layer_norm(x.data(), w.data(), bias.data(), T, E, 1e-12f, ref.data());
  expect_near_all(download(*mem_, dout), ref, 1e-5f, "layer_norm");

  ops_->gelu(dg.data(), T * E, dout.data());
  cpu_.gelu(g.data(), T * E, ref.data());
  expect_near_all(download(*mem_, dout), ref, 1e-5f, "gelu");

  ops_->silu_mul(dg.data(), dx.data(), T * E, dout.data());
  cpu_.silu_mul(g.data(), x.data(), T * E, ref.data());
  expect_near_all(download(*mem_, dout), ref, 1e-5f, "silu_mul");

  std::vector<float> y = g;
  auto dy = upload(*mem_, y);
  ops_->add_inplace(dy.data(), dx.data(), T * E);
  cpu_.add_inplace(y.data(), x.data(), T * E);
  expect_near_all(download(*mem_, dy), y, 0.0f, "add_inplace");
  ops_->add_bias(dy.data(), db.data(), T, E);
  cpu_.add_bias(y.data(), bias.data(), T, E);
  expect_near_all(download(*mem_, dy), y, 0.0f, "add_bias");

  const std::vector<int32_t> positions = {0, 1, 2, 17, 300, 4095, 9};
  for (bool neox : {false, true}) {
    std::vector<float> r = x;  // [T][heads][hd] = [7][5][64] = 7 x 320
    auto dr = upload(*mem_, r);
    ops_->rope(dr.data(), positions.data(), T, static_cast<int>(heads), static_cast<int>(hd), 10000.0f, neox);
    cpu_.rope(r.data(), positions.data(), T, static_cast<int>(heads), static_cast<int>(hd), 10000.0f, neox);
    expect_near_all(download(*mem_, dr), r, 1e-5f, neox ? "rope neox" : "rope");
  }
  expect_no_error();
}

TEST_F(CudaPlatformParts, EmbeddingEveryWeightTypeMatchesTheCpuOps) {
  const int64_t vocab = 19, dim = 256;
  const std::vector<int32_t> ids = {0, 18, 5, 5, 11};
  for (const std::string& name : weight_type_names()) {
    DType type = DType::f32;
    for (uint32_t id = 0; id < 256; ++id)
      if (auto tr = dtype_traits(id); tr && tr->name == name) type = static_cast<DType>(id);
    SCOPED_TRACE(name);
    const int64_t rb = row_bytes(type, dim);
    const auto raw = rand_vec(static_cast<size_t>(vocab * dim), 21);
    std::vector<uint8_t> table(static_cast<size_t>(rb * vocab));
    for (int64_t r = 0; r < vocab; ++r)
      kernels::cpu::quantize_row_reference(type, raw.data() + r * dim, table.data() + r * rb, dim);
    auto dt = upload(*mem_, table);
    WeightTensor w;
    w.name = "embd";
    w.type = type;
    w.n_dims = 2;
    w.ne[0] = dim;
    w.ne[1] = vocab;
    w.nbytes = table.size();
    DeviceArray<float> dout;
    ASSERT_TRUE(dout.allocate(*mem_, static_cast<int64_t>(ids.size()) * dim).ok());
    w.data = dt.data();
    ops_->embedding(w, ids.data(), static_cast<int64_t>(ids.size()), dout.data());
    std::vector<float> ref(ids.size() * dim);
    w.data = table.data();
    cpu_.embedding(w, ids.data(), static_cast<int64_t>(ids.size()), ref.data());
    expect_near_all(download(*mem_, dout), ref, 1e-6f, "embedding");
  }
  expect_no_error();
}

TEST_F(CudaPlatformParts, DenseAttentionMatchesTheCpuOps) {
  const int heads = 3, hd = 32;
  const std::vector<int32_t> starts = {0, 5, 6, 19};  // sequences of 5, 1 and 13 rows
  const int64_t T = starts.back(), row = int64_t{heads} * hd;
  const auto q = rand_vec(static_cast<size_t>(T * row), 31), k = rand_vec(static_cast<size_t>(T * row), 32),
             v = rand_vec(static_cast<size_t>(T * row), 33);
  auto dq = upload(*mem_, q), dk = upload(*mem_, k), dv = upload(*mem_, v);
  DeviceArray<float> dout;
  ASSERT_TRUE(dout.allocate(*mem_, T * row).ok());
  for (bool causal : {false, true}) {
    std::vector<float> ref(static_cast<size_t>(T * row));
    ops_->dense_attention(dq.data(), dk.data(), dv.data(), dout.data(), starts.data(), 3, heads, hd, 0.17f, causal);
    cpu_.dense_attention(q.data(), k.data(), v.data(), ref.data(), starts.data(), 3, heads, hd, 0.17f, causal);
    expect_near_all(download(*mem_, dout), ref, 1e-5f, causal ? "causal" : "bidirectional");
  }
  expect_no_error();
}

// Two steps on both backends: a prefill of 5 tokens beside a prefill of 3, then a decode of
// each; GQA (4 query heads on 2 kv heads), f16 and bf16 caches, blocks out of order.
TEST_F(CudaPlatformParts, PagedAttentionMatchesTheCpuBackend) {
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    KvCacheSpec spec;
    spec.block_size = 4;
    spec.num_layers = 2;
    spec.num_kv_heads = 2;
    spec.head_dim = 64;
    spec.dtype = dtype;
    CudaAttentionBackend gpu(ctx_);
    ASSERT_TRUE(gpu.allocate(spec, 8).ok());
    cpu::CpuAttentionBackend host(nullptr);
    KvCacheSpec host_spec = spec;
    if (dtype == DType::bf16) host_spec.dtype = DType::f32;  // the CPU backend has no bf16 cache
    ASSERT_TRUE(host.allocate(host_spec, 8).ok());
    const int heads = 4;
    const int64_t qrow = int64_t{heads} * 64, kvrow = 2 * 64;
    std::vector<std::vector<int32_t>> tables = {{5, 2}, {7}};
    std::vector<int> lens = {0, 0};
    const std::vector<int> adds[2] = {{5, 3}, {1, 1}};
    for (int step = 0; step < 2; ++step) {
      ForwardBatch b;
      b.query_start.push_back(0);
      for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < adds[step][s]; ++i) {
          const int pos = lens[s] + i;
          b.token_ids.push_back(1);
          b.positions.push_back(pos);
          b.slot_mapping.push_back(int64_t{tables[s][pos / 4]} * 4 + pos % 4);
        }
        lens[s] += adds[step][s];
        b.query_start.push_back(b.num_tokens());
        b.seq_lens.push_back(lens[s]);
        b.block_tables.push_back(tables[s]);
      }
      ASSERT_TRUE(gpu.check_batch(b).ok());
      const int64_t T = b.num_tokens();
      for (int layer = 0; layer < 2; ++layer) {
        const uint32_t seed = static_cast<uint32_t>(100 * step + 10 * layer);
        const auto q = rand_vec(static_cast<size_t>(T * qrow), seed + 1), k = rand_vec(static_cast<size_t>(T * kvrow), seed + 2),
                   v = rand_vec(static_cast<size_t>(T * kvrow), seed + 3);
        auto dq = upload(*mem_, q), dk = upload(*mem_, k), dv = upload(*mem_, v);
        DeviceArray<float> dout;
        ASSERT_TRUE(dout.allocate(*mem_, T * qrow).ok());
        gpu.forward(layer, dq.data(), dk.data(), dv.data(), dout.data(), heads, b, 0.125f);
        std::vector<float> ref(static_cast<size_t>(T * qrow));
        host.forward(layer, q.data(), k.data(), v.data(), ref.data(), heads, b, 0.125f);
        expect_near_all(download(*mem_, dout), ref, dtype == DType::bf16 ? 2e-2f : 2e-3f, "attention");
        expect_no_error();
      }
    }
  }
}

}  // namespace
}  // namespace troupe::cuda
