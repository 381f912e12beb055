// The kernels/cuda launchers refuse bad arguments with a clear Status before
// any CUDA call, so these checks run without a GPU (label unit). Also: the
// device probe's reason is the runtime's own message.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/sampling.hpp"

namespace troupe::kernels::cuda {
namespace {

// A non-null pointer that is never dereferenced (every call below fails its checks first).
const void* fake(uintptr_t v = 256) { return reinterpret_cast<const void*>(v); }
float* fake_f(uintptr_t v = 256) { return reinterpret_cast<float*>(v); }

TEST(CudaLaunchChecks, ProbeNamesTheRuntimeReasonOrFindsADevice) {
  const Status st = probe_device();
  if (st.ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(st.code(), StatusCode::unavailable);
  EXPECT_EQ(st.message().rfind("cudaGetDeviceCount: ", 0), 0u) << st.message();
}

TEST(CudaLaunchChecks, WeightTypes) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::q8_0, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_nl,
                  DType::iq4_xs})
    EXPECT_TRUE(supports_weight_type(t)) << to_string(t);
  EXPECT_FALSE(supports_weight_type(DType::q8_1));
  EXPECT_FALSE(supports_weight_type(DType::q8_k));
}

TEST(CudaLaunchChecks, EmbeddingRefusals) {
  const auto* ids = static_cast<const int32_t*>(fake());
  EXPECT_EQ(embedding(DType::q8_k, fake(), 0, 256, 10, ids, 1, fake_f(), nullptr).code(), StatusCode::not_supported);
  EXPECT_EQ(embedding(DType::q4_0, fake(), 0, 100, 10, ids, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);  // not whole blocks
  EXPECT_EQ(embedding(DType::q4_0, fake(), 10, 64, 10, ids, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);  // stride shorter than a row (36 bytes)
  EXPECT_EQ(embedding(DType::f32, fake(258), 0, 64, 10, ids, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);  // misaligned f32 table
  EXPECT_EQ(embedding(DType::f32, nullptr, 0, 64, 10, ids, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);
  EXPECT_TRUE(embedding(DType::f32, nullptr, 0, 64, 10, nullptr, 0, nullptr, nullptr).ok());  // nothing to do
}

TEST(CudaLaunchChecks, ElementwiseRefusals) {
  const auto* pos = static_cast<const int32_t*>(fake());
  EXPECT_EQ(rope(fake_f(), pos, 1, 2, 63, 10000.0f, false, nullptr).code(), StatusCode::invalid_argument);
  EXPECT_EQ(rope(fake_f(), pos, 1, 2, 2048, 10000.0f, false, nullptr).code(), StatusCode::invalid_argument);
  EXPECT_EQ(rms_norm(fake_f(), nullptr, 1, 0, 1e-5f, fake_f(), nullptr).code(), StatusCode::invalid_argument);
  EXPECT_EQ(silu_mul(nullptr, fake_f(), 5, fake_f(), nullptr).code(), StatusCode::invalid_argument);
  EXPECT_EQ(convert_from_f32(fake_f(), DType::q4_0, fake_f(), 5, nullptr).code(), StatusCode::not_supported);
  EXPECT_TRUE(add_inplace(nullptr, nullptr, 0, nullptr).ok());
  EXPECT_EQ(add_inplace(fake_f(), fake_f(), -1, nullptr).code(), StatusCode::invalid_argument);
}

TEST(CudaLaunchChecks, MatmulRefusals) {
  EXPECT_EQ(matmul(DType::q8_k, fake(), 0, 256, 4, fake(), DType::f32, 1, fake_f(), nullptr).code(),
            StatusCode::not_supported);
  EXPECT_EQ(matmul(DType::q4_0, fake(), 0, 256, 4, fake(), DType::bf16, 1, fake_f(), nullptr).code(),
            StatusCode::not_supported);  // activations f32 or f16 only
  EXPECT_EQ(matmul(DType::q4_k, fake(), 0, 128, 4, fake(), DType::f32, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);  // 128 is not a whole Q4_K block
  EXPECT_EQ(matmul(DType::q8_0, fake(), 0, 64, 0, fake(), DType::f32, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);
  EXPECT_EQ(matmul(DType::f16, fake(257), 0, 64, 4, fake(), DType::f32, 1, fake_f(), nullptr).code(),
            StatusCode::invalid_argument);  // misaligned f16 weights
  EXPECT_EQ(matmul_with_path(MatmulPath::tiled, DType::f32, fake(), 0, 64, 4, fake(), DType::f32,
                             int64_t{70000} * 64, fake_f(), nullptr)
                .code(),
            StatusCode::invalid_argument);  // grid.y limit
}

TEST(CudaLaunchChecks, AttentionRefusals) {
  PagedAttentionParams p;
  p.q = fake_f();
  p.out = fake_f();
  p.num_tokens = 1;
  p.num_seqs = 1;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 512;
  EXPECT_EQ(paged_attention(p, nullptr).code(), StatusCode::invalid_argument);  // head_dim too large
  p.head_dim = 64;
  p.num_kv_heads = 3;
  EXPECT_EQ(paged_attention(p, nullptr).code(), StatusCode::invalid_argument);  // 8 heads over 3 kv heads
  p.num_kv_heads = 2;
  p.cache_type = DType::q8_0;
  EXPECT_EQ(paged_attention(p, nullptr).code(), StatusCode::not_supported);
  p.cache_type = DType::f16;
  EXPECT_EQ(paged_attention(p, nullptr).code(), StatusCode::invalid_argument);  // null query_start etc.
  EXPECT_EQ(paged_kv_store(nullptr, nullptr, DType::q4_0, nullptr, nullptr, nullptr, 1, 64, 16, nullptr).code(),
            StatusCode::not_supported);
  EXPECT_EQ(copy_kv_blocks(nullptr, 0, 4, nullptr, 1, nullptr).code(), StatusCode::invalid_argument);
  EXPECT_TRUE(copy_kv_blocks(nullptr, 64, 4, nullptr, 0, nullptr).ok());
}

TEST(CudaLaunchChecks, SamplingRefusals) {
  EXPECT_EQ(sampling_workspace_bytes(int64_t{1} << 20, int64_t{1} << 20).status().code(),
            StatusCode::invalid_argument);  // rows * vocab past INT_MAX
  EXPECT_EQ(sampling_workspace_bytes(0, 100).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(argmax_rows(fake_f(), 1, 0, static_cast<int32_t*>(const_cast<void*>(fake())), nullptr).code(),
            StatusCode::invalid_argument);
}

}  // namespace
}  // namespace troupe::kernels::cuda
