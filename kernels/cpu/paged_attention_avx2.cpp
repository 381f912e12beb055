// Paged attention work items on 8-lane AVX2 vectors (this file alone is built with
// -mavx2 -mfma -mf16c); the items themselves are paged_attention_simd.hpp's.
#include "kernels/cpu/paged_attention_simd.hpp"

namespace troupe::kernels::cpu {
namespace {

struct Avx2Vec {
  using F = __m256;
  static constexpr int W = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_load_ps(p); }
  static F loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_store_ps(p, v); }
  static void storeu(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F from_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  // Keys row by row ([i][d]), as the values.
  static void store_key_row(KvDtype dtype, const void* cache, int64_t offset, int hd, int i, float* k) {
    load_row<Avx2Vec>(dtype, cache, offset, hd, k + i * hd);
  }
  static void zero_key_row(int hd, int i, float* k) { std::fill_n(k + i * hd, hd, 0.0f); }
  static __m128 score4(const float* q, const float* k, int hd, int i) {
    k += i * hd;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 qd = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qd, _mm256_load_ps(k + d), a0);
      a1 = _mm256_fmadd_ps(qd, _mm256_load_ps(k + hd + d), a1);
      a2 = _mm256_fmadd_ps(qd, _mm256_load_ps(k + 2 * hd + d), a2);
      a3 = _mm256_fmadd_ps(qd, _mm256_load_ps(k + 3 * hd + d), a3);
    }
    return hsum4_8(a0, a1, a2, a3);
  }
  // Keys i..i+7: score4's operations for two quads at once. Zen 3 has two FMA pipes of
  // latency 4, so 4 chains kept half of them idle.
  static void score8(const float* q, const float* k, int hd, int i, __m128* lo, __m128* hi) {
    k += i * hd;
    __m256 a[8];
    for (int j = 0; j < 8; ++j) a[j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 qd = _mm256_loadu_ps(q + d);
      for (int j = 0; j < 8; ++j) a[j] = _mm256_fmadd_ps(qd, _mm256_load_ps(k + j * hd + d), a[j]);
    }
    *lo = hsum4_8(a[0], a[1], a[2], a[3]);
    *hi = hsum4_8(a[4], a[5], a[6], a[7]);
  }
};

}  // namespace

void attend_item_avx2(const PagedAttentionArgs& A, int s, int kv_head, int j0, int j1) {
  attend_item_simd<Avx2Vec>(A, s, kv_head, j0, j1);
}

void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) dst[i] = static_cast<uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace troupe::kernels::cpu
