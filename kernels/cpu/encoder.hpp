// Kernels of encoder models (BERT): LayerNorm with bias, exact (erf) GELU,
// bias rows, and dense attention over each sequence's own tokens (no KV cache,
// every token sees every token of its sequence unless causal).
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

/// out = (x - mean) / sqrt(var + eps) * weight + bias, per row of `dim`.
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                float* out);
/// out[i] = 0.5 x (1 + erf(x / sqrt(2))) (Hugging Face's "gelu").
void gelu_erf(const float* x, int64_t n, float* out);
/// y[t][i] += bias[i] for every row t.
void add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim);
/// Attention of heads [h_begin, h_end) of sequence rows [row_begin, row_end):
/// q, k, v, out are [T][n_heads][head_dim]; scores in float, softmax per row.
void dense_attention(const float* q, const float* k, const float* v, float* out, int64_t row_begin, int64_t row_end,
                     int n_heads, int head_dim, int h_begin, int h_end, float scale, bool causal);

}  // namespace troupe::kernels::cpu
