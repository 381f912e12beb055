// Kernels of encoder models (BERT) on device memory, with the semantics of
// kernels/cpu/encoder.hpp: LayerNorm with bias, exact (erf) GELU, bias rows, and
// dense attention within each sequence of a batch (no KV cache).
#pragma once

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// out = (x - mean) / sqrt(var + eps) * weight + bias per row of dim (bias may be null;
/// out may alias x). Mean and variance in double, as on the CPU.
Status layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                  float* out, cudaStream_t stream);

/// out[i] = 0.5 x (1 + erf(x / sqrt(2))) (out may alias x).
Status gelu_erf(const float* x, int64_t n, float* out, cudaStream_t stream);

/// y[t][i] += bias[i] for t < n_tokens.
Status add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim, cudaStream_t stream);

/// The longest sequence dense_attention takes (its scores live in shared memory).
constexpr int64_t kDenseAttentionMaxLen = 8192;

/// Attention within each sequence: q, k, v, out are [num_tokens][n_heads][head_dim];
/// sequence s owns rows [seq_starts[s], seq_starts[s+1]) (seq_starts: a device array of
/// num_seqs + 1 entries, seq_starts[num_seqs] == num_tokens). Every row attends to every
/// row of its sequence, or only to itself and earlier ones when causal. Scores and the
/// softmax in float. max_len: the longest sequence (at most kDenseAttentionMaxLen).
Status dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                       int num_seqs, int64_t num_tokens, int n_heads, int head_dim, float scale, bool causal,
                       int64_t max_len, cudaStream_t stream);

}  // namespace troupe::kernels::cuda
