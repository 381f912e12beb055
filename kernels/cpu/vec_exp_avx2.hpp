// exp(x) for 8 floats with AVX2/FMA, for translation units built with -mavx2 -mfma:
// Cody-Waite range reduction (x = n ln2 + r, |r| <= ln2/2) and a degree-7
// polynomial for e^r, then the exponent bits; within 2 ulp of exp on
// [-87.3, 88.7], 0 below (exp(-inf) = 0), +inf above. One fixed sequence of
// operations, so equal inputs give equal outputs wherever it runs.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__)
#error "vec_exp_avx2.hpp is for translation units built with -mavx2 -mfma"
#endif

#include <immintrin.h>

namespace troupe::kernels::cpu {

inline __m256 exp256_ps(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228f);
  const __m256 lo = _mm256_set1_ps(-87.3365f);  // below: the result would be subnormal; flush to 0
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
  const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
  r = _mm256_fnmadd_ps(n, ln2_lo, r);
  // e^r = 1 + r + r^2 (c2 + r (c3 + r (c4 + r (c5 + r (c6 + r c7))))) (Cephes expf).
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // times 2^n: n in [-126, 128]; 2^128 = 2 * 2^127 keeps the exponent field in range.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_andnot_ps(under, y);
  return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), over);
}

}  // namespace troupe::kernels::cpu
