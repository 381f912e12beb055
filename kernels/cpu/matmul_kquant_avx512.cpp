// The K-quant (Q2_K to Q6_K) and IQ4_XS matmul kernels on 512-bit vectors (this file
// alone is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni besides AVX2): the
// tiles of matmul_kquant_avx2.hpp and matmul_kx_avx2.hpp with 64 weight levels per
// vpmaddubsw + vpdpwssd instead of
// 32, i.e. half the instructions per super-block. The integer sums of a super-block
// and the float steps after them are the same, so the results are bit-identical to
// the AVX2 and portable kernels (matmul_impl.hpp).
#include <immintrin.h>

#include "kernels/cpu/group_out_avx512.hpp"
#include "kernels/cpu/matmul_kquant_avx2.hpp"
#include "kernels/cpu/matmul_kx_avx2.hpp"
#include "kernels/cpu/transpose16_avx512.hpp"

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

// Q5_K's fifth bits of chunk c as 16s: bit 2c of qh[0..31] for the first 32 elements
// (sub-block 2c), bit 2c + 1 for the next 32 (qh2: qh in both halves).
inline __m512i q5k_high64(__m512i qh2, int c) {
  const __m512i shift = _mm512_setr_epi64(2 * c, 2 * c, 2 * c, 2 * c, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1);
  return _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh2, shift), _mm512_set1_epi8(1)), 4);
}

// Q4_K, and Q5_K (kQ5): 64 elements (sub-blocks 2c and 2c + 1, chunk c of qs) per vector.
template <bool kQ5, int R, int T>
void tile_q45k_512(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const KTile<Block, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  __m512i idx[4];
  for (int c = 0; c < 4; ++c) idx[c] = word_pair_index(2 * c, 2 * c + 1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8], m[8];
    LaneScales<R, T> ls;
    for (int r = 0; r < R; ++r) {
      const Block& blk = k.w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      uint64_t sc, mn;
      q4k_scales_mins(blk.scales, &sc, &mn);
      const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
      const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(mn)), dup));
      __m512i si[T];
      for (int t = 0; t < T; ++t) si[t] = _mm512_setzero_si512();
      __m512i qh2 = _mm512_setzero_si512();
      if constexpr (kQ5) qh2 = _mm512_broadcast_i64x4(load256u(blk.qh));
      for (int c = 0; c < 4; ++c) {
        __m512i lv = nibbles64(blk.qs + 32 * c);
        if constexpr (kQ5) lv = _mm512_or_si512(lv, q5k_high64(qh2, c));
        const __m512i scv = _mm512_permutexvar_epi16(idx[c], sc16);
        for (int t = 0; t < T; ++t)  // levels <= 31, |x| <= 127: pair sums fit int16
          si[t] = _mm512_dpwssd_epi32(si[t], _mm512_maddubs_epi16(lv, load512u(k.x[t][b].qs + 64 * c)), scv);
      }
      for (int t = 0; t < T; ++t) {
        s[t * R + r] = fold8(si[t]);
        m[t * R + r] = _mm256_madd_epi16(load256u(k.x[t][b].bsums), mn16);
      }
      const float d = h2f(blk.d), dmin = h2f(blk.dmin);
      ls.set(r, d, dmin, k.x, b);
    }
    acc = tile_step<kQ5 ? KStep::q5k : KStep::q4k>(acc, s, m, ls);
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
    LaneScales<R, T> ls;
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
      ls.set(r, d, 0.0f, k.x, b);
    }
    acc = tile_step<KStep::plain>(acc, s, nullptr, ls);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

// Q2_K (kKind 2) and Q3_K (3): tile_q23k with 64 elements per vector. Half h's 32 bytes
// of bit pairs give runs j = 2v (low 256 bits) and 2v + 1 (high) per vector v, groups
// 8h + 4v + 0..3 of 16 elements each.
template <int kKind, int R, int T>
void tile_q23k_512(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  constexpr bool kQ3 = kKind == 3;
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  const KTile<Block, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  alignas(64) int16_t idx_words[2][32];
  for (int v = 0; v < 2; ++v)
    for (int i = 0; i < 32; ++i) idx_words[v][i] = static_cast<int16_t>(4 * v + i / 8);  // word i: elements 2i, 2i+1
  const __m512i idx[2] = {_mm512_load_si512(idx_words[0]), _mm512_load_si512(idx_words[1])};
  const __m512i low2 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8], m[8];
    LaneScales<R, T> ls;
    for (int r = 0; r < R; ++r) {
      const Block& blk = k.w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      __m128i sc8;
      __m512i hm = _mm512_setzero_si512();
      if constexpr (kQ3) {
        sc8 = q3k_scales16(blk.scales);
        hm = _mm512_broadcast_i64x4(load256u(blk.hmask));
      } else {
        sc8 = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)), _mm_set1_epi8(0x0f));
      }
      __m512i si[T];
      for (int t = 0; t < T; ++t) si[t] = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i qb = _mm512_broadcast_i64x4(load256u(blk.qs + 32 * h));
        const __m512i sch = _mm512_castsi128_si512(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
        for (int v = 0; v < 2; ++v) {
          const int j0 = 2 * v, j1 = 2 * v + 1;
          __m512i lv = _mm512_and_si512(
              _mm512_srlv_epi64(qb, _mm512_setr_epi64(2 * j0, 2 * j0, 2 * j0, 2 * j0, 2 * j1, 2 * j1, 2 * j1, 2 * j1)),
              low2);
          if constexpr (kQ3) {  // high bit 4h + j as 4
            const int p0 = 4 * h + j0, p1 = 4 * h + j1;
            const __m512i hb = _mm512_and_si512(
                _mm512_srlv_epi64(hm, _mm512_setr_epi64(p0, p0, p0, p0, p1, p1, p1, p1)), one);
            lv = _mm512_or_si512(lv, _mm512_slli_epi16(hb, 2));
          }
          const __m512i scv = _mm512_permutexvar_epi16(idx[v], sch);
          for (int t = 0; t < T; ++t)  // levels <= 7, |x| <= 127: pair sums fit int16
            si[t] = _mm512_dpwssd_epi32(si[t], _mm512_maddubs_epi16(lv, load512u(k.x[t][b].qs + 128 * h + 64 * v)),
                                        scv);
        }
      }
      if constexpr (kQ3) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        for (int t = 0; t < T; ++t)  // - 4 * sum_g sc[g] * bsums[g]
          s[t * R + r] = _mm256_sub_epi32(fold8(si[t]),
                                          _mm256_slli_epi32(_mm256_madd_epi16(load256u(k.x[t][b].bsums), sc16), 2));
      } else {
        const __m256i mn16 = _mm256_cvtepu8_epi16(
            _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)), 4),
                          _mm_set1_epi8(0x0f)));
        for (int t = 0; t < T; ++t) {
          s[t * R + r] = fold8(si[t]);
          m[t * R + r] = _mm256_madd_epi16(load256u(k.x[t][b].bsums), mn16);
        }
      }
      const float d = h2f(blk.d);
      float dmin = 0.0f;
      if constexpr (!kQ3) dmin = h2f(blk.dmin);
      ls.set(r, d, dmin, k.x, b);
    }
    acc = tile_step<kQ3 ? KStep::plain : KStep::q5k>(acc, s, m, ls);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

// IQ4_XS: sub-blocks 2v and 2v + 1 (32 bytes of nibbles) as 64 signed grid levels per
// vector; AVX-512 has no vpsignb, so the levels' signs move to x by a masked subtraction.
template <int R, int T>
void tile_iq4xs_512(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  const KTile<BlockIQ4_XS, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  alignas(64) int8_t grid4[64];
  for (int i = 0; i < 64; ++i) grid4[i] = kIq4Values[i % 16];
  const __m512i grid = _mm512_load_si512(grid4);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i nib_shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  __m512i idx[4];
  for (int v = 0; v < 4; ++v) idx[v] = word_pair_index(2 * v, 2 * v + 1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8];
    LaneScales<R, T> ls;
    for (int r = 0; r < R; ++r) {
      const BlockIQ4_XS& blk = k.w[r][b];
      prefetch_block<sizeof(BlockIQ4_XS)>(&blk, ahead);
      const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepi8_epi16(iq4xs_scales8(blk)));
      __m512i si[T];
      for (int t = 0; t < T; ++t) si[t] = _mm512_setzero_si512();
      for (int v = 0; v < 4; ++v) {
        // 128-bit lanes A B A B -> A A B B; lane 2i then takes the low nibbles of sub-block
        // 2v + i (its elements 0..15), lane 2i + 1 the high ones (16..31).
        const __m512i raw = _mm512_broadcast_i64x4(load256u(blk.qs + 32 * v));
        const __m512i dup = _mm512_shuffle_i64x2(raw, raw, _MM_SHUFFLE(1, 1, 0, 0));
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(dup, nib_shift), low4);
        const __m512i lv = _mm512_shuffle_epi8(grid, nib);
        const __m512i mag = _mm512_abs_epi8(lv);
        const __mmask64 neg = _mm512_movepi8_mask(lv);
        const __m512i scv = _mm512_permutexvar_epi16(idx[v], sc16);
        for (int t = 0; t < T; ++t) {  // |level|, |x| <= 127: pair sums fit int16
          const __m512i xv = load512u(k.x[t][b].qs + 64 * v);
          const __m512i xs = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
          si[t] = _mm512_dpwssd_epi32(si[t], _mm512_maddubs_epi16(mag, xs), scv);
        }
      }
      for (int t = 0; t < T; ++t) s[t * R + r] = fold8(si[t]);
      const float d = h2f(blk.d);
      ls.set(r, d, 0.0f, k.x, b);
    }
    acc = tile_step<KStep::plain>(acc, s, nullptr, ls);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

// Batches: R rows x G groups of 16 tokens with the tokens in lanes (ActQ8Kx16). Per
// super-block each row's levels are unpacked once into a small buffer; each quad of
// levels is broadcast from it (a load) and multiplied with G groups' quads by vpdpbusd
// (4 multiply-adds per lane), each activation vector with R rows' quads: the lanes hold
// whole sums, so there are no horizontal sums and one float step per super-block serves
// 16 tokens. A sub-block's sums are scaled once (vpmulld) into S; the mins' term M takes
// 4 vpdpwssd per (row, group) on the activations' 32-element sums. Scales and min pairs
// are widened to dwords once per row, so they too are broadcast from memory.
// Q5_K (kQ5) the same, with its fifth bits in the unpacked levels and its float step.
// (The r and g loops are unrolled by pragma so that GCC keeps the arrays of vectors in
// registers: unrolled late, they stay in memory.)
template <bool kQ5, int R, int G>
void tile_q45k_groups(const MatmulArgs& a, int64_t o, int64_t g0, GroupRowsOut<G>& out) {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const int64_t nb = a.in / kQKK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ8Kx16* xg[G];
  for (int g = 0; g < G; ++g) xg[g] = a.xk16 + (g0 + g) * nb;
  // The same block of the next tile's rows.
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes / 4, R * a.w_row_stride);
  alignas(64) uint8_t lv[R][kQKK];
  alignas(64) int32_t sc[R][8], mn[R][4];  // scales; min pairs (mins 2p, 2p + 1 as int16)
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    float dw[R], dm[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Block& blk = w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      alignas(8) uint8_t sc8[8], mn8[8];
      if constexpr (kQ5) {
        unpack_q5k(blk, lv[r], sc8, mn8);
      } else {
        unpack_q4k(blk, lv[r], sc8, mn8);
      }
      const __m128i sc8v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc8));
      const __m128i mn8v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn8));
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc[r]), _mm256_cvtepu8_epi32(sc8v));
      _mm_store_si128(reinterpret_cast<__m128i*>(mn[r]), _mm_cvtepu8_epi16(mn8v));
      dw[r] = h2f(blk.d);
      dm[r] = h2f(blk.dmin);
    }
    // Opaque from here on, so the quads, scales and min pairs are broadcast from memory
    // (a load), not extracted.
    asm("" : "+m"(lv), "+m"(sc), "+m"(mn));
    __m512i S[R][G];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) S[r][g] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      __m512i sub[R][G];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) sub[r][g] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        __m512i xv[G];
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(xg[g][b].q[8 * j + i]);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, lv[r] + 32 * j + 4 * i, 4);
          const __m512i wq = _mm512_set1_epi32(quad);
#pragma GCC unroll 16
          for (int g = 0; g < G; ++g) sub[r][g] = _mm512_dpbusd_epi32(sub[r][g], wq, xv[g]);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i scv = _mm512_set1_epi32(sc[r][j]);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) S[r][g] = _mm512_add_epi32(S[r][g], _mm512_mullo_epi32(sub[r][g], scv));
      }
    }
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const __m512 dx = _mm512_load_ps(xg[g][b].d);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p)
          m = _mm512_dpwssd_epi32(m, _mm512_set1_epi32(mn[r][p]), _mm512_load_si512(xg[g][b].bs[p]));
        const __m512 dwx = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx), dmx = _mm512_mul_ps(_mm512_set1_ps(dm[r]), dx);
        if constexpr (kQ5) {  // q5k_step on 16 lanes
          acc[r][g] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), dmx,
                                       _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r][g]), dwx, acc[r][g]));
        } else {  // q4k_step on 16 lanes
          const __m512 mt = _mm512_mul_ps(_mm512_cvtepi32_ps(m), dmx);
          acc[r][g] = _mm512_add_ps(acc[r][g], _mm512_fmsub_ps(_mm512_cvtepi32_ps(S[r][g]), dwx, mt));
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) out.put(o + r, g, acc[r][g]);
}

// Q6_K batches: as tile_q45k_groups with 16-element groups (4 quads) and signed scales;
// the -32 comes back exactly through the activations' 16-element sums (bs16).
template <int R, int G>
void tile_q6k_groups(const MatmulArgs& a, int64_t o, int64_t g0, GroupRowsOut<G>& out) {
  const int64_t nb = a.in / kQKK;
  const BlockQ6_K* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const BlockQ6_K*>(a.w + (o + r) * a.w_row_stride);
  const ActQ8Kx16* xg[G];
  for (int g = 0; g < G; ++g) xg[g] = a.xk16 + (g0 + g) * nb;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes / 4, R * a.w_row_stride);
  alignas(64) uint8_t lv[R][kQKK];
  alignas(64) int32_t sc[R][16], sc_pairs[R][8];  // scales; scale pairs (2p, 2p + 1 as int16)
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    float dw[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const BlockQ6_K& blk = w[r][b];
      prefetch_block<sizeof(BlockQ6_K)>(&blk, ahead);
      unpack_q6k(blk, lv[r]);
      const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
      _mm512_store_si512(sc[r], _mm512_cvtepi8_epi32(s8));
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc_pairs[r]), _mm256_cvtepi8_epi16(s8));
      dw[r] = h2f(blk.d);
    }
    asm("" : "+m"(lv), "+m"(sc), "+m"(sc_pairs));
    __m512i S[R][G];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) {  // - 32 * sum_g sc[g] * bsums[g]
        __m512i off = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p)
          off = _mm512_dpwssd_epi32(off, _mm512_set1_epi32(sc_pairs[r][p]), _mm512_load_si512(xg[g][b].bs16[p]));
        S[r][g] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(off, 5));
      }
    }
    for (int k = 0; k < 16; ++k) {  // group k: quads 4k..4k+3
      __m512i sub[R][G];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) sub[r][g] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        __m512i xv[G];
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(xg[g][b].q[4 * k + i]);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, lv[r] + 16 * k + 4 * i, 4);
          const __m512i wq = _mm512_set1_epi32(quad);
#pragma GCC unroll 16
          for (int g = 0; g < G; ++g) sub[r][g] = _mm512_dpbusd_epi32(sub[r][g], wq, xv[g]);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i scv = _mm512_set1_epi32(sc[r][k]);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) S[r][g] = _mm512_add_epi32(S[r][g], _mm512_mullo_epi32(sub[r][g], scv));
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g)
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r][g]),
                                    _mm512_mul_ps(_mm512_set1_ps(dw[r]), _mm512_load_ps(xg[g][b].d)), acc[r][g]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) out.put(o + r, g, acc[r][g]);
}

// Q2_K, Q3_K and IQ4_XS batches (the KxW traits of matmul_kx_avx2.hpp): as
// tile_q6k_groups, with each type's offset, scaling of the group sums and mins.
template <class W, int R, int G>
void tile_kx_groups(const MatmulArgs& a, int64_t o, int64_t g0, GroupRowsOut<G>& out) {
  using Block = typename W::Block;
  static_assert(!W::kSigned, "vpdpbusd takes unsigned weight bytes");
  constexpr int kGroup = W::kGroup, kGroups = kQKK / kGroup;
  const int64_t nb = a.in / kQKK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ8Kx16* xg[G];
  for (int g = 0; g < G; ++g) xg[g] = a.xk16 + (g0 + g) * nb;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes / 4, R * a.w_row_stride);
  alignas(64) uint8_t lv[R][kQKK];
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    alignas(32) int16_t sc[R][16];
    alignas(16) uint8_t mn[R][16];
    float dw[R], dm[R];
    for (int r = 0; r < R; ++r) {
      const Block& blk = w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      W::unpack(blk, lv[r], sc[r], mn[r]);
      dw[r] = h2f(blk.d);
      dm[r] = W::dmin(blk);
    }
    asm("" : "+m"(lv));
    __m512i S[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) {
        S[r][g] = _mm512_setzero_si512();
        if constexpr (W::kOffsetLog2 > 0) {  // - 2^k * sum_g sc[g] * (sum of x over g)
          __m512i off = _mm512_setzero_si512();
          for (int p = 0; p < kGroups / 2; ++p)
            off = _mm512_dpwssd_epi32(off, _mm512_set1_epi32(int16_pair(sc[r][2 * p], sc[r][2 * p + 1])),
                                      _mm512_load_si512(kGroup == 16 ? xg[g][b].bs16[p] : xg[g][b].bs[p]));
          S[r][g] = _mm512_sub_epi32(S[r][g], _mm512_slli_epi32(off, W::kOffsetLog2));
        }
      }
    for (int k = 0; k < kGroups; ++k) {
      __m512i sub[R][G];
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g) sub[r][g] = W::kPrescaled ? S[r][g] : _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < kGroup / 4; ++i) {
        __m512i xv[G];
        for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(xg[g][b].q[kGroup / 4 * k + i]);
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, lv[r] + kGroup * k + 4 * i, 4);
          const __m512i wq = _mm512_set1_epi32(quad);
          for (int g = 0; g < G; ++g) sub[r][g] = _mm512_dpbusd_epi32(sub[r][g], wq, xv[g]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g) {
          if constexpr (W::kPrescaled) {
            S[r][g] = sub[r][g];
          } else if constexpr (W::kFold16) {  // the low int16 of sub is sub itself
            S[r][g] = _mm512_dpwssd_epi32(S[r][g], sub[r][g], _mm512_set1_epi32(static_cast<uint16_t>(sc[r][k])));
          } else {
            S[r][g] = _mm512_add_epi32(S[r][g], _mm512_mullo_epi32(sub[r][g], _mm512_set1_epi32(sc[r][k])));
          }
        }
    }
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) {
        const __m512 dx = _mm512_load_ps(xg[g][b].d);
        const __m512 dwx = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
        if constexpr (W::kMins) {  // q5k_step on 16 lanes
          __m512i m = _mm512_setzero_si512();
          for (int p = 0; p < 8; ++p)
            m = _mm512_dpwssd_epi32(m, _mm512_set1_epi32(int16_pair(mn[r][2 * p], mn[r][2 * p + 1])),
                                    _mm512_load_si512(xg[g][b].bs16[p]));
          acc[r][g] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(_mm512_set1_ps(dm[r]), dx),
                                       _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r][g]), dwx, acc[r][g]));
        } else {
          acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r][g]), dwx, acc[r][g]);
        }
      }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) out.put(o + r, g, acc[r][g]);
}

// Tiles of kRowsK rows x G groups over rows [o0, o1), then the tail rows 2 and 1 at a
// time, their results staged in out and written kChunk rows at a time.
constexpr int kRowsK = 4;
template <template <int, int> class Tile, int G>
void rows_groups(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t g) {
  GroupRowsOut<G> out(a, g, o0);
  int64_t o = o0;
  for (; o + kRowsK <= o1; o += kRowsK) {
    Tile<kRowsK, G>::run(a, o, g, out);
    if (o + kRowsK - out.base() >= GroupRowsOut<G>::kChunk) out.flush(o + kRowsK);
  }
  for (; o + 2 <= o1; o += 2) Tile<2, G>::run(a, o, g, out);
  for (; o < o1; ++o) Tile<1, G>::run(a, o, g, out);
  out.flush(o1);
}

template <int R, int G>
struct Q4KGroups {
  static void run(const MatmulArgs& a, int64_t o, int64_t g, GroupRowsOut<G>& out) {
    tile_q45k_groups<false, R, G>(a, o, g, out);
  }
};
template <int R, int G>
struct Q5KGroups {
  static void run(const MatmulArgs& a, int64_t o, int64_t g, GroupRowsOut<G>& out) {
    tile_q45k_groups<true, R, G>(a, o, g, out);
  }
};
template <int R, int G>
struct Q6KGroups {
  static void run(const MatmulArgs& a, int64_t o, int64_t g, GroupRowsOut<G>& out) {
    tile_q6k_groups<R, G>(a, o, g, out);
  }
};

template <int R, int G>
struct Q3KGroups {
  static void run(const MatmulArgs& a, int64_t o, int64_t g, GroupRowsOut<G>& out) {
    tile_kx_groups<Q3KW, R, G>(a, o, g, out);
  }
};
template <int R, int G>
struct Q2KGroups {
  static void run(const MatmulArgs& a, int64_t o, int64_t g, GroupRowsOut<G>& out) {
    tile_kx_groups<Q2KW, R, G>(a, o, g, out);
  }
};
template <int R, int G>
struct IQ4XSGroups {
  static void run(const MatmulArgs& a, int64_t o, int64_t g, GroupRowsOut<G>& out) {
    tile_kx_groups<IQ4XSW, R, G>(a, o, g, out);
  }
};

template <int R, int T>
struct Q2KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q23k_512<2, R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct Q3KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q23k_512<3, R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct IQ4XSTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_iq4xs_512<R, T>(a, o, t, nr, nt); }
};

template <int R, int T>
struct Q4KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) {
    tile_q45k_512<false, R, T>(a, o, t, nr, nt);
  }
};
template <int R, int T>
struct Q5KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) {
    tile_q45k_512<true, R, T>(a, o, t, nr, nt);
  }
};
template <int R, int T>
struct Q6KTile512 {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q6k_512<R, T>(a, o, t, nr, nt); }
};

// Whole groups of 16 tokens (2 per pass over the rows: their activations stay in L2),
// then the tokens after them: 1 to 4 by the decode kernels (matmul_kquant_decode_avx512.cpp)
// 16 rows at a time, the rest in the R x T tiles.
template <template <int, int> class Groups, template <int, int> class Tile>
void range_512(const MatmulArgs& a, int64_t o0, int64_t o1) {
  int64_t g = 0;
  for (; g + 2 <= a.n_groups_k; g += 2) rows_groups<Groups, 2>(a, o0, o1, g);
  for (; g < a.n_groups_k; ++g) rows_groups<Groups, 1>(a, o0, o1, g);
  const int64_t t_rest = a.n_groups_k * 16;
  range_kquant_from<Tile>(a, kquant_decode_avx512(a, o0, o1, t_rest), o1, t_rest);
}

}  // namespace

void act_group16_q8k_avx512(const ActQ8K* rows, int64_t nb, int n, ActQ8Kx16* group) {
  for (int64_t b = 0; b < nb; ++b) {
    alignas(64) float d[16];
    alignas(64) int32_t bs[4][16], bs16[8][16];
    const auto pair = [](int lo, int hi) {
      return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                  (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
    };
    for (int t = 0; t < 16; ++t) {
      const ActQ8K* blk = t < n ? &rows[t * nb + b] : nullptr;
      d[t] = blk != nullptr ? blk->d : 0.0f;
      for (int p = 0; p < 8; ++p) bs16[p][t] = blk != nullptr ? pair(blk->bsums[2 * p], blk->bsums[2 * p + 1]) : 0;
      for (int p = 0; p < 4; ++p) {
        if (blk == nullptr) {
          bs[p][t] = 0;
          continue;
        }
        const int lo = blk->bsums[4 * p] + blk->bsums[4 * p + 1];      // elements 64p..64p+31
        const int hi = blk->bsums[4 * p + 2] + blk->bsums[4 * p + 3];  // 64p+32..64p+63
        bs[p][t] = pair(lo, hi);
      }
    }
    std::memcpy(group[b].d, d, sizeof(d));
    std::memcpy(group[b].bs, bs, sizeof(bs));
    std::memcpy(group[b].bs16, bs16, sizeof(bs16));
    for (int k = 0; k < 4; ++k) {  // quads 16k..16k+15 of every token
      __m512i r[16], q[16];
      for (int t = 0; t < 16; ++t) r[t] = t < n ? load512u(rows[t * nb + b].qs + 64 * k) : _mm512_setzero_si512();
      transpose16(r, q);
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(group[b].q[16 * k + i], q[i]);
    }
  }
}

MatmulRangeFn matmul_kernel_kquant_avx512(DType type) {
  switch (type) {
    case DType::q4_k: return range_512<Q4KGroups, Q4KTile512>;
    case DType::q5_k: return range_512<Q5KGroups, Q5KTile512>;
    case DType::q6_k: return range_512<Q6KGroups, Q6KTile512>;
    case DType::q2_k: return range_512<Q2KGroups, Q2KTile512>;
    case DType::q3_k: return range_512<Q3KGroups, Q3KTile512>;
    case DType::iq4_xs: return range_512<IQ4XSGroups, IQ4XSTile512>;
    default: return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
