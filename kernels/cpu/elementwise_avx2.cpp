// AVX2/FMA versions of the vector primitives attention loops over.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/vec_exp_avx2.hpp"

namespace troupe::kernels::cpu {

float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  s0 = _mm256_add_ps(s0, s1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

void axpy_f32_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

void add_inplace_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp256_ps(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float in[8] = {}, out[8];
    for (int64_t k = i; k < n; ++k) in[k - i] = x[k];
    _mm256_storeu_ps(out, exp256_ps(_mm256_loadu_ps(in)));
    for (int64_t k = i; k < n; ++k) y[k] = out[k - i];
  }
}

namespace {

// out[i] = f(a[i], b[i]) eight at a time; the tail through the same vector code (so an
// element's result never depends on where it falls). out may alias a or b.
template <class F>
void map2_avx2(const float* a, const float* b, int64_t n, float* out, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) {
    float x[8] = {}, y[8] = {}, o[8];
    for (int64_t k = i; k < n; ++k) {
      x[k - i] = a[k];
      y[k - i] = b[k];
    }
    _mm256_storeu_ps(o, f(_mm256_loadu_ps(x), _mm256_loadu_ps(y)));
    for (int64_t k = i; k < n; ++k) out[k] = o[k - i];
  }
}

// x / (1 + exp(-z)): x * sigmoid(z); 0 (signed) where exp(-z) overflows.
inline __m256 times_sigmoid(__m256 x, __m256 z) {
  const __m256 e = exp256_ps(_mm256_sub_ps(_mm256_setzero_ps(), z));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
// no tanh, and no cancellation where tanh(u) is near -1.
inline __m256 gelu_tanh8(__m256 x) {
  const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), x), x, _mm256_set1_ps(1.0f));
  return times_sigmoid(x, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f), x), inner));
}

}  // namespace

// silu(g) * u = g / (1 + exp(-g)) * u.
void silu_mul_avx2(const float* gate, const float* up, int64_t n, float* out) {
  map2_avx2(gate, up, n, out, [](__m256 g, __m256 u) { return _mm256_mul_ps(times_sigmoid(g, g), u); });
}

void gelu_tanh_mul_avx2(const float* gate, const float* up, int64_t n, float* out) {
  map2_avx2(gate, up, n, out, [](__m256 g, __m256 u) { return _mm256_mul_ps(gelu_tanh8(g), u); });
}

void gelu_tanh_avx2(const float* x, int64_t n, float* out) {
  map2_avx2(x, x, n, out, [](__m256 v, __m256) { return gelu_tanh8(v); });
}

}  // namespace troupe::kernels::cpu
