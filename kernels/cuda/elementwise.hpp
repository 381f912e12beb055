// Elementwise and per-row kernels around the matmuls, on device memory: the
// embedding gather, RMSNorm, rotary embedding, SiLU-and-mul, add, and float
// conversions. Same numerics as kernels/cpu (elementwise.hpp, dequantize.cpp).
// All pointers are device pointers; every launcher enqueues on `stream`.
#pragma once

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// True when embedding() and matmul() read weights of `type`:
/// f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs mxfp4 (the CPU set).
bool supports_weight_type(DType type);

/// out[t][0..dim) = row ids[t] of `table` as floats. The table holds `vocab`
/// rows of `dim` elements of `type`, row r at byte r * row_stride (0: rows are
/// contiguous, row_bytes(type, dim) apart). An id outside [0, vocab) gives a
/// row of zeros (the caller validates token ids; this only keeps memory safe).
Status embedding(DType type, const void* table, int64_t row_stride, int64_t dim, int64_t vocab, const int32_t* ids,
                 int64_t n, float* out, cudaStream_t stream);

/// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight per row of dim (weight
/// may be null: all ones; out may alias x). Sum of squares in double, as on the CPU.
Status rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out,
                cudaStream_t stream);

/// Rotary embedding in place, x [n_tokens][n_heads][head_dim], token t at
/// positions[t]; pair i turns by positions[t] * theta^(-2i/head_dim), angles in
/// double as on the CPU. neox = false rotates (x[2i], x[2i+1]), true rotates
/// (x[i], x[i + head_dim/2]). head_dim even, at most 1024.
Status rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta, bool neox,
            cudaStream_t stream);
/// rope with pair i's angle divided by freq_factors[i] (device memory; null: all 1) and both
/// outputs times mscale (named_ops::RopeFreqFactors).
Status rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                         bool neox, const float* freq_factors, float mscale, cudaStream_t stream);

/// out = silu(gate) * up elementwise (out may alias gate or up).
Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

/// y += x elementwise.
Status add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream);

/// dst[0..n) = src converted to `dst_type` (f16 or bf16, round to nearest even;
/// f32 copies): activations for the cuBLAS GEMMs.
Status convert_from_f32(const float* src, DType dst_type, void* dst, int64_t n, cudaStream_t stream);

}  // namespace troupe::kernels::cuda
