// Paged attention work items on 16-lane AVX-512 vectors (this file alone is built with
// AVX-512; chosen at run time with the avx512_vnni ISA for head dims that are multiples
// of 16): half the multiply-adds and conversions of the AVX2 items per key, with the
// same operations per element, so the results are the AVX2 items' bit for bit. The items
// are paged_attention_simd.hpp's.
#include "kernels/cpu/paged_attention_simd.hpp"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's 512-bit intrinsics (bug 105593)

#if !defined(__AVX512F__)
#error "paged_attention_avx512.cpp is built with -mavx512f"
#endif

namespace troupe::kernels::cpu {
namespace {

struct Avx512Vec {
  using F = __m512;
  static constexpr int W = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_load_ps(p); }
  static F loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_store_ps(p, v); }
  static void storeu(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F from_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // Keys in pairs: 8 elements of key 2p then the same 8 of key 2p + 1 ([p][d / 8][2][8]),
  // so one 16-lane multiply-add takes two keys' 8-lane steps.
  static float* key_chunk(float* k, int hd, int i, int d) { return k + ((i / 2) * (hd / 8) + d / 8) * 16 + (i % 2) * 8; }
  static void store_key_row(KvDtype dtype, const void* cache, int64_t offset, int hd, int i, float* k) {
    for (int d = 0; d < hd; d += 16) {
      const __m512 v = dtype == KvDtype::f16 ? from_f16(static_cast<const uint16_t*>(cache) + offset + d)
                                             : _mm512_loadu_ps(static_cast<const float*>(cache) + offset + d);
      _mm256_store_ps(key_chunk(k, hd, i, d), _mm512_castps512_ps256(v));
      _mm256_store_ps(key_chunk(k, hd, i, d + 8), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    }
  }
  static void zero_key_row(int hd, int i, float* k) {
    for (int d = 0; d < hd; d += 8) _mm256_store_ps(key_chunk(k, hd, i, d), _mm256_setzero_ps());
  }
  // The AVX2 items' operations: each half of a0 (a2) is key i's (i + 2's) 8-lane chain, the
  // other key i + 1's (i + 3's).
  static __m128 score4(const float* q, const float* k, int hd, int i) {
    const float* k01 = key_chunk(const_cast<float*>(k), hd, i, 0);
    const float* k23 = key_chunk(const_cast<float*>(k), hd, i + 2, 0);
    __m512 a01 = _mm512_setzero_ps(), a23 = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m512 qd = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(q + d))));
      a01 = _mm512_fmadd_ps(qd, _mm512_load_ps(k01 + 2 * d), a01);
      a23 = _mm512_fmadd_ps(qd, _mm512_load_ps(k23 + 2 * d), a23);
    }
    auto hi = [](__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); };
    return hsum4_8(_mm512_castps512_ps256(a01), hi(a01), _mm512_castps512_ps256(a23), hi(a23));
  }
};

}  // namespace

void attend_item_avx512(const PagedAttentionArgs& A, int s, int kv_head, int j0, int j1) {
  attend_item_simd<Avx512Vec>(A, s, kv_head, j0, j1);
}

}  // namespace troupe::kernels::cpu
