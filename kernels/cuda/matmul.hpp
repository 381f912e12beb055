// Matrix products against GGUF-layout weights on the GPU, dequantizing the
// weights on the fly (no dequantized copy of a matrix is ever made).
#pragma once

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tokens, o < out, in float.
/// W: `out` rows of `in` elements of w_type (supports_weight_type: f32, f16,
/// bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4), row o at byte o * w_row_stride
/// of w (0: contiguous, row_bytes(w_type, in) apart), `in` a whole number of
/// blocks. x: [n_tokens][in] of x_type, f32 or f16. y: [n_tokens][out] f32.
/// Weights are read element by element exactly as kernels/cpu dequantize_row
/// defines them, activations are used as given (not quantized, unlike the CPU
/// matmul), sums are in f32. n_tokens <= kGemvMaxTokens runs a warp-per-row
/// GEMV, more tokens a 64x64-tiled GEMM.
Status matmul(DType w_type, const void* w, int64_t w_row_stride, int64_t in, int64_t out, const void* x, DType x_type,
              int64_t n_tokens, float* y, cudaStream_t stream);

/// The largest batch the GEMV path takes; larger batches go to the tiled GEMM.
constexpr int64_t kGemvMaxTokens = 8;

/// The two paths of matmul by name, for tests that must cover both whatever the shape.
enum class MatmulPath { gemv, tiled };
Status matmul_with_path(MatmulPath path, DType w_type, const void* w, int64_t w_row_stride, int64_t in, int64_t out,
                        const void* x, DType x_type, int64_t n_tokens, float* y, cudaStream_t stream);

}  // namespace troupe::kernels::cuda
