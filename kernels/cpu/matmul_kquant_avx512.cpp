// The Q4_K and Q6_K matmul kernels on 512-bit vectors (this file alone is built with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni besides AVX2): the tiles of
// matmul_kquant_avx2.hpp with 64 weight levels per vpmaddubsw + vpdpwssd instead of
// 32, i.e. half the instructions per super-block. The integer sums of a super-block
// and the float steps after them are the same, so the results are bit-identical to
// the AVX2 and portable kernels (matmul_impl.hpp).
#include <immintrin.h>

#include "kernels/cpu/matmul_kquant_avx2.hpp"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's 512-bit intrinsics (bug 105593)

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "matmul_kquant_avx512.cpp is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

namespace troupe::kernels::cpu {
namespace {

inline __m512i load512u(const void* p) { return _mm512_loadu_si512(p); }

// The 16 lanes of a 512-bit integer sum folded to 8 (lane i + lane i + 8).
inline __m256i fold8(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

// 32 bytes of nibbles -> 64 levels in element order: the low nibbles, then the high ones.
inline __m512i nibbles64(const uint8_t* qs) {
  const __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)));
  return _mm512_and_si512(_mm512_srlv_epi64(b, _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4)), _mm512_set1_epi8(0x0f));
}

// vpermw index: words 0..15 take word i, words 16..31 word j.
inline __m512i word_pair_index(int i, int j) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(i)),
                                 _mm512_set1_epi16(static_cast<int16_t>(j)));
}

// Q4_K: 64 elements (sub-blocks 2c and 2c + 1, chunk c of qs) per vector.
template <int R, int T>
void tile_q4k_512(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  const KTile<BlockQ4_K, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  __m512i idx[4];
  for (int c = 0; c < 4; ++c) idx[c] = word_pair_index(2 * c, 2 * c + 1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8], m[8];
    alignas(32) float dw[8], dm[8], dx[8];
    for (int r = 0; r < R; ++r) {
      const BlockQ4_K& blk = k.w[r][b];
      prefetch_block<sizeof(BlockQ4_K)>(&blk, ahead);
      uint64_t sc, mn;
      q4k_scales_mins(blk.scales, &sc, &mn);
      const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
      const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(mn)), dup));
      __m512i si[T];
      for (int t = 0; t < T; ++t) si[t] = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        const __m512i lv = nibbles64(blk.qs + 32 * c);
        const __m512i scv = _mm512_permutexvar_epi16(idx[c], sc16);
        for (int t = 0; t < T; ++t)  // levels <= 15, |x| <= 127: pair sums fit int16
          si[t] = _mm512_dpwssd_epi32(si[t], _mm512_maddubs_epi16(lv, load512u(k.x[t][b].qs + 64 * c)), scv);
      }
      for (int t = 0; t < T; ++t) {
        s[t * R + r] = fold8(si[t]);
        m[t * R + r] = _mm256_madd_epi16(load256u(k.x[t][b].bsums), mn16);
      }
      const float d = h2f(blk.d), dmin = h2f(blk.dmin);
      for (int t = 0; t < T; ++t) {
        dw[t * R + r] = d;
        dm[t * R + r] = dmin;
        dx[t * R + r] = k.x[t][b].d;
      }
    }
    const __m256 dxv = _mm256_load_ps(dx);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(s)), _mm256_mul_ps(_mm256_load_ps(dw), dxv), acc);
    acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(m)), _mm256_mul_ps(_mm256_load_ps(dm), dxv), acc);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

// Q6_K: half h's 4 runs of 32 elements as two vectors of 64 (runs 0 and 1 of ql's
// nibbles, then 2 and 3); the -32 through the bsums as in the AVX2 kernel.
template <int R, int T>
void tile_q6k_512(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  const KTile<BlockQ6_K, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  // Vector v (0, 1) of half h holds runs 2v and 2v + 1: groups 8h + 4v + 0..3, 16 elements each.
  alignas(64) int16_t idx_words[2][32];
  for (int v = 0; v < 2; ++v)
    for (int i = 0; i < 32; ++i) idx_words[v][i] = static_cast<int16_t>(4 * v + i / 8);  // word i: elements 2i, 2i+1
  const __m512i idx[2] = {_mm512_load_si512(idx_words[0]), _mm512_load_si512(idx_words[1])};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8];
    alignas(32) float dw[8], dx[8];
    for (int r = 0; r < R; ++r) {
      const BlockQ6_K& blk = k.w[r][b];
      prefetch_block<sizeof(BlockQ6_K)>(&blk, ahead);
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      __m512i si[T];
      for (int t = 0; t < T; ++t) si[t] = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = load512u(blk.ql + 64 * h);  // runs 0, 1 low nibbles; runs 2, 3 high
        const __m512i qh = _mm512_broadcast_i64x4(load256u(blk.qh + 32 * h));
        // Scales 8h..8h+7 as words 0..7.
        const __m512i sch = _mm512_castsi128_si512(
            _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales + 8 * h))));
        // qh bits 0-1 belong to run 0, 2-3 to run 1 (upper 256 bits), 4-5 run 2, 6-7 run 3.
        const __m512i qh01 = _mm512_srlv_epi64(qh, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
        const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                            _mm512_slli_epi16(_mm512_and_si512(qh01, low2), 4));
        const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh01, 4), low2), 4));
        const __m512i sc01 = _mm512_permutexvar_epi16(idx[0], sch);
        const __m512i sc23 = _mm512_permutexvar_epi16(idx[1], sch);
        for (int t = 0; t < T; ++t) {  // levels <= 63, |x| <= 127: pair sums fit int16
          const int8_t* xq = k.x[t][b].qs + 128 * h;
          si[t] = _mm512_dpwssd_epi32(si[t], _mm512_maddubs_epi16(q01, load512u(xq)), sc01);
          si[t] = _mm512_dpwssd_epi32(si[t], _mm512_maddubs_epi16(q23, load512u(xq + 64)), sc23);
        }
      }
      for (int t = 0; t < T; ++t)  // - 32 * sum_g sc[g] * bsums[g]
        s[t * R + r] = _mm256_sub_epi32(fold8(si[t]),
                                        _mm256_slli_epi32(_mm256_madd_epi16(load256u(k.x[t][b].bsums), sc16), 5));
      const float d = h2f(blk.d);
      for (int t = 0; t < T; ++t) {
        dw[t * R + r] = d;
        dx[t * R + r] = k.x[t][b].d;
      }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(s)), _mm256_mul_ps(_mm256_load_ps(dw), _mm256_load_ps(dx)),
                          acc);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

template <int R, int T>
struct Q4KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q4k_512<R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct Q6KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q6k_512<R, T>(a, o, t, nr, nt); }
};

}  // namespace

MatmulRangeFn matmul_kernel_kquant_avx512(DType type) {
  switch (type) {
    case DType::q4_k: return range_kquant<Q4KTile512>;
    case DType::q6_k: return range_kquant<Q6KTile512>;
    default: return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
