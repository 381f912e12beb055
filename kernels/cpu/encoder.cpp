#include "kernels/cpu/encoder.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise.hpp"

namespace troupe::kernels::cpu {

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = x + t * dim;
    double mean = 0;
    for (int64_t i = 0; i < dim; ++i) mean += row[i];
    mean /= static_cast<double>(dim);
    double var = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double d = row[i] - mean;
      var += d * d;
    }
    var /= static_cast<double>(dim);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    float* o = out + t * dim;
    for (int64_t i = 0; i < dim; ++i)
      o[i] = static_cast<float>((row[i] - mean) * inv) * weight[i] + (bias ? bias[i] : 0.0f);
  }
}

void gelu_erf(const float* x, int64_t n, float* out) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) {
  for (int64_t t = 0; t < n_tokens; ++t) add_inplace(y + t * dim, bias, dim);
}

void dense_attention(const float* q, const float* k, const float* v, float* out, int64_t row_begin, int64_t row_end,
                     int n_heads, int head_dim, int h_begin, int h_end, float scale, bool causal) {
  const int64_t stride = static_cast<int64_t>(n_heads) * head_dim;
  const int64_t n = row_end - row_begin;
  std::vector<float> scores(static_cast<size_t>(n));
  for (int h = h_begin; h < h_end; ++h) {
    for (int64_t i = row_begin; i < row_end; ++i) {
      const float* qi = q + i * stride + static_cast<int64_t>(h) * head_dim;
      const int64_t last = causal ? i + 1 : row_end;
      const int64_t m = last - row_begin;
      for (int64_t j = row_begin; j < last; ++j)
        scores[j - row_begin] = dot_f32(qi, k + j * stride + static_cast<int64_t>(h) * head_dim, head_dim) * scale;
      softmax_inplace(scores.data(), m);
      float* oi = out + i * stride + static_cast<int64_t>(h) * head_dim;
      std::fill(oi, oi + head_dim, 0.0f);
      for (int64_t j = row_begin; j < last; ++j)
        axpy_f32(scores[j - row_begin], v + j * stride + static_cast<int64_t>(h) * head_dim, oi, head_dim);
    }
  }
}

}  // namespace troupe::kernels::cpu
