// Elementwise kernels. The hot vector primitives (dot, axpy, add) dispatch to
// AVX2 when active; the rest is plain C++ the compiler vectorizes.
#include "kernels/cpu/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/isa.hpp"

namespace troupe::kernels::cpu {

#if defined(TROUPE_KERNELS_HAVE_AVX2)
float dot_f32_avx2(const float* a, const float* b, int64_t n);
void axpy_f32_avx2(float a, const float* x, float* y, int64_t n);
void add_inplace_avx2(float* y, const float* x, int64_t n);
void silu_mul_avx2(const float* gate, const float* up, int64_t n, float* out);
#define TROUPE_USE_AVX2() is_avx2(active_isa())
#else
#define TROUPE_USE_AVX2() false
#endif

void rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * dim;
    float* o = out + t * dim;
    double ss = 0.0;  // double: dims reach thousands, keep the mean exact enough
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    if (weight != nullptr) {
      for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale * weight[i];
    } else {
      for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale;
    }
  }
}

void rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta, bool neox) {
  rope_freq_factors(x, positions, n_tokens, n_heads, head_dim, theta, neox, nullptr, 1.0f);
}

void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                       bool neox, const float* freq_factors, float mscale) {
  const int half = head_dim / 2;
  float cs[512], sn[512];  // per pair; head_dim <= 1024
  const int pairs = std::min(half, 512);
  double freq[512];  // the same values for every token: computed once per call
  for (int i = 0; i < pairs; ++i) {
    freq[i] = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (freq_factors != nullptr) freq[i] /= static_cast<double>(freq_factors[i]);
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(positions[t]) * freq[i];
      cs[i] = static_cast<float>(std::cos(angle)) * mscale;
      sn[i] = static_cast<float>(std::sin(angle)) * mscale;
    }
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * static_cast<int64_t>(head_dim);
      for (int i = 0; i < pairs; ++i) {
        float* a = neox ? v + i : v + 2 * i;
        float* b = neox ? v + i + half : v + 2 * i + 1;
        const float x0 = *a, x1 = *b;
        *a = x0 * cs[i] - x1 * sn[i];
        *b = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  if (TROUPE_USE_AVX2()) return silu_mul_avx2(gate, up, n, out);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  if (TROUPE_USE_AVX2()) return add_inplace_avx2(y, x, n);
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

float dot_f32(const float* a, const float* b, int64_t n) {
  if (TROUPE_USE_AVX2()) return dot_f32_avx2(a, b, n);
  float s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  if (TROUPE_USE_AVX2()) return axpy_f32_avx2(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void softmax_inplace(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  if (mx == -std::numeric_limits<float>::infinity()) {  // all masked: uniform beats NaN
    for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / static_cast<float>(n);
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace troupe::kernels::cpu
