// Small float kernels around the matmuls: norms, rotary embedding, activations
// and the vector primitives attention is built from.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

/// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, per row of `dim`
/// (weight may be nullptr: all ones). out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out);

/// Rotary embedding in place. x is [n_tokens][n_heads][head_dim]; token t is at
/// positions[t]. Pair i (< head_dim/2) turns by positions[t] * theta^(-2i/head_dim):
/// neox = false rotates (x[2i], x[2i+1]) (GGUF llama), true rotates (x[i], x[i + head_dim/2]).
void rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta, bool neox);
/// rope with pair i's angle divided by freq_factors[i] (null: all 1) and both outputs
/// times mscale (named_ops::RopeFreqFactors).
void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                       bool neox, const float* freq_factors, float mscale);

/// out = silu(gate) * up, elementwise; out may alias gate or up. Each element's result
/// depends only on its inputs (and the ISA: AVX2 uses a vector exp within 2 ulp).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

/// exp(x) with the AVX2 vector exp (within 2 ulp); only when built for x86-64 (tests).
void exp_avx2(const float* x, float* y, int64_t n);

/// y += x.
void add_inplace(float* y, const float* x, int64_t n);

/// sum a[i] * b[i].
float dot_f32(const float* a, const float* b, int64_t n);

/// y += a * x.
void axpy_f32(float a, const float* x, float* y, int64_t n);

/// x = exp(x - max) / sum, in place (n >= 1; -inf entries become 0).
void softmax_inplace(float* x, int64_t n);

}  // namespace troupe::kernels::cpu
