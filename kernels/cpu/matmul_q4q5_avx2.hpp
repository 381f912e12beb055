// Q4_0, Q5_0, IQ4_NL and MXFP4 (signed levels, 32-element blocks) against 8-bit ActQ8
// activations, included by the AVX2 translation units: plain AVX2
// (matmul_avx2.cpp: vpmaddubsw + vpmaddwd), AVX-VNNI (matmul_avx2_vnni.cpp) and
// AVX-512 VNNI (matmul_avx512_vnni.cpp), both vpdpbusd.
// The byte products take the weights' levels made unsigned by an offset (Q4_0 +8,
// Q5_0 +16, IQ4_NL +128) and the signed activations; the offset comes back
// exactly through the activation block's sum, so every lane holds the block's exact
// integer dot product S and then
//   acc = fma(float(S), d_w * d_x, acc)
// in block order (matmul_impl.hpp), bit-identical to the portable kernel. Plain
// AVX2 multiplies IQ4_NL's signed levels instead (see kSignedBytes).
//
// Decode and small batches: 8 rows in lanes x up to 4 tokens, the 8 rows' block sums
// reduced together (reduce8_epi32; Q4_0 and Q5_0 on plain AVX2: 2 rows per vector,
// reduced in int16, rows8_tokens_pairs). Batches: groups of 16 tokens in lanes (ActQ8x16)
// x R rows, each weight dword broadcast against 16 tokens' dwords.
#pragma once

#include <type_traits>

#include "kernels/cpu/matmul_q8_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

// The low nibbles (elements 0..15) and the high ones (16..31) of 16 bytes at qa (low
// 128 bits) and at qb (high).
inline void nibble_pair(const uint8_t* qa, const uint8_t* qb, __m256i* lo, __m256i* hi) {
  const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(qb), reinterpret_cast<const __m128i*>(qa));
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  *lo = _mm256_and_si256(v, low4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
}

// Unsigned levels in element order and the offset that makes them signed.
// pair(): elements 0..15 (lo) and 16..31 (hi) of blocks a (low 128 bits) and b (high),
// for rows8_tokens_pairs.
struct Q4_0U {
  using Block = BlockQ4_0;
  static constexpr int kOffsetShift = 3;  // levels - 8
  static __m256i u(const Block& b) { return nibbles32(b.qs); }
  static void pair(const Block& a, const Block& b, __m256i* lo, __m256i* hi) { nibble_pair(a.qs, b.qs, lo, hi); }
};
struct Q5_0U {
  using Block = BlockQ5_0;
  static constexpr int kOffsetShift = 4;  // levels - 16
  static __m256i u(const Block& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits(b.qh)); }
  static void pair(const Block& a, const Block& b, __m256i* lo, __m256i* hi) {
    nibble_pair(a.qs, b.qs, lo, hi);
    // a's 4 bytes of fifth bits in dword 0 of both halves, b's in dword 1: the low half
    // takes a's bytes (0, 1 for lo, 2, 3 for hi), the high half b's (4, 5; 6, 7).
    uint32_t qa, qb;
    std::memcpy(&qa, a.qh, 4);
    std::memcpy(&qb, b.qh, 4);
    const __m256i bits = _mm256_broadcastsi128_si256(
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(qa)), static_cast<int>(qb), 1));
    const auto ctrl = [](char k) {
      return _mm256_setr_epi8(k, k, k, k, k, k, k, k, k + 1, k + 1, k + 1, k + 1, k + 1, k + 1, k + 1, k + 1, k + 4, k + 4,
                              k + 4, k + 4, k + 4, k + 4, k + 4, k + 4, k + 5, k + 5, k + 5, k + 5, k + 5, k + 5, k + 5,
                              k + 5);
    };
    *lo = _mm256_or_si256(*lo, bit_bytes16(bits, ctrl(0)));
    *hi = _mm256_or_si256(*hi, bit_bytes16(bits, ctrl(2)));
  }
};
// IQ4_NL: each nibble looks up its grid value + 128 (1..241) in one pshufb.
// s(): the signed levels, for plain AVX2 (kSignedBytes).
struct IQ4_NLU {
  using Block = BlockIQ4_NL;
  static constexpr int kOffsetShift = 7;  // levels - 128
  static __m256i grid(const int8_t* values) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  }
  static __m256i s(const Block& b) { return _mm256_shuffle_epi8(grid(kIq4Values), nibbles32(b.qs)); }
  static __m256i u(const Block& b) { return _mm256_shuffle_epi8(grid(kIq4ValuesU), nibbles32(b.qs)); }
  // kIq4Values + 128, as the bytes vpdpbusd reads unsigned.
  static constexpr int8_t kIq4ValuesU[16] = {
      static_cast<int8_t>(kIq4Values[0] + 128),  static_cast<int8_t>(kIq4Values[1] + 128),
      static_cast<int8_t>(kIq4Values[2] + 128),  static_cast<int8_t>(kIq4Values[3] + 128),
      static_cast<int8_t>(kIq4Values[4] + 128),  static_cast<int8_t>(kIq4Values[5] + 128),
      static_cast<int8_t>(kIq4Values[6] + 128),  static_cast<int8_t>(kIq4Values[7] + 128),
      static_cast<int8_t>(kIq4Values[8] + 128),  static_cast<int8_t>(kIq4Values[9] + 128),
      static_cast<int8_t>(kIq4Values[10] + 128), static_cast<int8_t>(kIq4Values[11] + 128),
      static_cast<int8_t>(kIq4Values[12] + 128), static_cast<int8_t>(kIq4Values[13] + 128),
      static_cast<int8_t>(kIq4Values[14] + 128), static_cast<int8_t>(kIq4Values[15] + 128)};
};

// MXFP4: each nibble looks up its doubled E2M1 value + 16 (4..28) in one pshufb; the
// block's scale is an E8M0 byte, not a half (block_scale, e8m0_half8).
struct MXFP4U {
  using Block = BlockMXFP4;
  static constexpr int kOffsetShift = 4;  // levels - 16
  static constexpr int8_t kValuesU[16] = {16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4};
  static __m256i u(const Block& b) { return _mm256_shuffle_epi8(IQ4_NLU::grid(kValuesU), nibbles32(b.qs)); }
};
template <class W>
constexpr bool kE8M0 = std::is_same_v<W, MXFP4U>;

// A block's scale as a float: its f16 d, or MXFP4's E8M0 byte.
template <class W>
inline float block_scale(const typename W::Block& b) {
  if constexpr (kE8M0<W>) {
    return e8m0_half(b.e);
  } else {
    return h2f(b.d);
  }
}

// 8 E8M0 bytes (the low 8 of e8) as floats 2^(e - 128), exactly as e8m0_half.
inline __m256 e8m0_half8(__m128i e8) {
  const __m256i e = _mm256_cvtepu8_epi32(e8);
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);  // e < 2: subnormal
  const __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
}

// Plain AVX2's vpmaddubsw adds pairs of byte products into int16 with saturation:
// levels up to 31 fit (2 x 31 x 127), IQ4_NL's offset levels (up to 241) do not
// (2 x 241 x 127 = 61214). There the signed levels meet the activations instead, as
// |level| x (activation with the level's sign): at most 2 x 127 x 127 = 32258 (2 x 128
// x 127 for an int8 -128), exact, and no offset to take back. The integer S is the
// same, so the results are too.
template <class W>
constexpr bool kSignedBytes = !kHaveDpbusd && W::kOffsetShift > 4;

// acc + the sums of 4 adjacent byte products, unsigned u x signed s. Levels <= 31 and
// |s| <= 127: vpmaddubsw's pair sums fit int16 (no saturation), so all paths agree.
inline __m256i dot_bytes_acc(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return chain_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

inline __m256i dot_bytes(__m256i u, __m256i s) {
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  return dot_bytes_acc(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// A block's levels as the byte products below take them: unsigned (offset), or
// signed where kSignedBytes.
template <class W>
inline __m256i levels_of(const typename W::Block& b) {
  if constexpr (kSignedBytes<W>) {
    return W::s(b);
  } else {
    return W::u(b);
  }
}

// acc + the sums of 4 adjacent products of levels_of<W> bytes and activations.
template <class W>
inline __m256i dot_levels_acc(__m256i acc, __m256i l, __m256i x) {
  if constexpr (kSignedBytes<W>) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(l), _mm256_sign_epi8(x, l));
    return chain_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  } else {
    return dot_bytes_acc(acc, l, x);
  }
}

template <class W>
inline __m256i dot_levels(__m256i l, __m256i x) {
  if constexpr (kSignedBytes<W>) {
    return dot_levels_acc<W>(_mm256_setzero_si256(), l, x);
  } else {
    return dot_bytes(l, x);
  }
}

// What the offset added to dot_levels: offset x the activations' sum (0 where signed).
template <class W>
inline int32_t offset_of(int32_t sum) {
  return kSignedBytes<W> ? 0 : sum << W::kOffsetShift;
}
template <class W>
inline __m256i offset_of(__m256i sums) {
  if constexpr (kSignedBytes<W>) {
    return _mm256_setzero_si256();
  } else {
    return _mm256_slli_epi32(sums, W::kOffsetShift);
  }
}

// T tokens' 8-row results (lanes = rows) to y, rows from nr on dropped.
template <int T>
inline void store_rows8(const MatmulArgs& a, int64_t o, int nr, int64_t t0, const __m256* acc) {
  for (int t = 0; t < T; ++t) {
    float* y = a.y + (t0 + t) * a.out + o;
    if (nr == 8) {
      _mm256_storeu_ps(y, acc[t]);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[t]);
      for (int r = 0; r < nr; ++r) y[r] = lanes[r];
    }
  }
}

// 8 rows (lanes; rows from nr on repeat row 0, computed, never stored) x T tokens.
template <class W, int T>
inline void rows8_tokens_b8(const MatmulArgs& a, int64_t o, int nr, int64_t t0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* wr[8];
  for (int r = 0; r < 8; ++r) wr[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ8* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ8*>(a.xq + (t0 + t) * a.xq_row_bytes);
  // The next tile: by span for short rows, else per row at least a tile ahead.
  NextTilePrefetch pf(a, o, nb);
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    pf.step(b);
    __m256i u[8];
    // The 8 f16 scales into one vector word by word (a uint16_t array assembled in
    // general registers costs more than the dot products).
    __m128i h = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      if (!pf.by_span) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + b) + ahead, _MM_HINT_T0);
      u[r] = levels_of<W>(wr[r][b]);
      if constexpr (kE8M0<W>) {
        h = _mm_insert_epi8(h, wr[r][b].e, r);
      } else {
        h = _mm_insert_epi16(h, wr[r][b].d, r);
      }
    }
    const __m256 dw = kE8M0<W> ? e8m0_half8(h) : _mm256_cvtph_ps(h);
    for (int t = 0; t < T; ++t) {
      const ActQ8& xb = x[t][b];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      __m256i p[8];
      for (int r = 0; r < 8; ++r) p[r] = dot_levels<W>(u[r], xv);
      const __m256i s = _mm256_sub_epi32(reduce8_epi32(p), _mm256_set1_epi32(offset_of<W>(xb.sum)));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(xb.d)), acc[t]);
    }
  }
  store_rows8<T>(a, o, nr, t0, acc);
}

// Decode and small batches (T tokens), Q4_0 and Q5_0 on plain AVX2: rows r and r + 4
// share a vector, r's block in the low half and r + 4's in the high (W::pair), so one
// load, one mask and one shift split 2 rows' nibbles (nibbles32 takes 3 operations for
// one row), once for the T tokens. Low nibbles are elements 0..15, high 16..31: they
// meet the activations' halves, each broadcast to both 128-bit lanes. A token's 8 row
// sums are reduced in int16 as far as no word can wrap, then in int32: a word after
// the first hadd is the sum of 8 byte products, after the second of 16, at most
// 16 x 15 x 127 = 30480 for Q4_0 (levels <= 15: both hadds in int16, then one
// vpmaddwd) and 8 x 31 x 127 = 31496 for Q5_0 (one). reduce8 took 4 vpmaddwd, 6 hadds
// and 2 permutes. The block sums are the same integers, so the results are
// bit-identical. One thread, 2048 x 384 from L2, GMAC/s at 1 / 2 / 4 / 7 tokens:
// Q4_0 28 / 34 / 37 / 36 -> 34 / 44 / 55 / 52; Q5_0 at 1 / 4 tokens 18.9 / 30.7 ->
// 19.0 / 42.4 (its fifth bits cost as much as before). Its setup (pointers, prefetch,
// accumulators) is written out as rows8_tokens_b8's is: both through one struct
// measured IQ4_NL at 4 tokens 32.3 -> 29.5 and Q4_0 55.4 -> 53.7 GMAC/s (one thread,
// 2048 x 384).
template <class W, int T>
inline void rows8_tokens_pairs(const MatmulArgs& a, int64_t o, int nr, int64_t t0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* wr[8];
  for (int r = 0; r < 8; ++r) wr[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ8* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ8*>(a.xq + (t0 + t) * a.xq_row_bytes);
  NextTilePrefetch pf(a, o, nb);
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    pf.step(b);
    __m128i h = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      if (!pf.by_span) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + b) + ahead, _MM_HINT_T0);
      h = _mm_insert_epi16(h, wr[r][b].d, r);
    }
    const __m256 dw = _mm256_cvtph_ps(h);
    __m256i lo[4], hi[4];
    for (int r = 0; r < 4; ++r) W::pair(wr[r][b], wr[r + 4][b], &lo[r], &hi[r]);
    for (int t = 0; t < T; ++t) {
      const ActQ8& xb = x[t][b];
      const __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs)));
      const __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs + 16)));
      __m256i p[4];
      for (int r = 0; r < 4; ++r)
        p[r] = _mm256_add_epi16(_mm256_maddubs_epi16(lo[r], xlo), _mm256_maddubs_epi16(hi[r], xhi));
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i h01 = _mm256_hadd_epi16(p[0], p[1]), h23 = _mm256_hadd_epi16(p[2], p[3]);
      const __m256i sums =
          std::is_same_v<W, Q4_0U>
              ? _mm256_madd_epi16(_mm256_hadd_epi16(h01, h23), ones)
              : _mm256_hadd_epi32(_mm256_madd_epi16(h01, ones), _mm256_madd_epi16(h23, ones));
      const __m256i s = _mm256_sub_epi32(sums, _mm256_set1_epi32(offset_of<W>(xb.sum)));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(xb.d)), acc[t]);
    }
  }
  store_rows8<T>(a, o, nr, t0, acc);
}

// rows8_tokens_pairs where it applies (Q4_0, Q5_0 on plain AVX2), else rows8_tokens_b8.
template <class W, int T>
inline void rows8_tokens(const MatmulArgs& a, int64_t o, int nr, int64_t t0) {
  if constexpr (!kHaveDpbusd && (std::is_same_v<W, Q4_0U> || std::is_same_v<W, Q5_0U>)) {
    rows8_tokens_pairs<W, T>(a, o, nr, t0);
  } else {
    rows8_tokens_b8<W, T>(a, o, nr, t0);
  }
}

// Rows [o0, o1) x tokens [t0, t1): 8-row tiles, 4 tokens per pass.
template <class W>
void rows_tokens_b8(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
  for (int64_t o = o0; o < o1; o += 8) {
    const int nr = static_cast<int>(std::min<int64_t>(8, o1 - o));
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) rows8_tokens<W, 4>(a, o, nr, t);
    switch (t1 - t) {
      case 3: rows8_tokens<W, 3>(a, o, nr, t); break;
      case 2: rows8_tokens<W, 2>(a, o, nr, t); break;
      case 1: rows8_tokens<W, 1>(a, o, nr, t); break;
      default: break;
    }
  }
}

#if !defined(__AVX512F__)
// Quads whose vpmaddubsw pair sums can be added in int16 without wrapping, on plain
// AVX2 (|x| <= 127): unsigned levels <= 15 (Q4_0) 8 x 2 x 15 x 127 = 30480, <= 31
// (Q5_0) 4 x 2 x 31 x 127; 1 (no runs) with vpdpbusd or IQ4_NL's signed bytes.
template <class W>
constexpr int kRunB8 = (kHaveDpbusd || kSignedBytes<W>) ? 1 : W::kOffsetShift == 3 ? 8 : W::kOffsetShift == 4 ? 4 : 1;

// R rows (rows from nr on repeat row 0, never stored) x G groups of 16 tokens in
// lanes, each as two 256-bit halves (H halves in all). With more than 4 (row, half)
// pairs and more than one run per block, the block's int32 sums live in memory, one
// copy reached through an opaque pointer, as in tile_kquant_group_i16
// (matmul_kquant_avx2.hpp); with one run (Q4_0), each is that run's vpmaddwd.
template <class W, int R, int G = 1>
inline void rows_group16_b8(const MatmulArgs& a, int64_t o, int nr, int64_t g) {
  using Block = typename W::Block;
  constexpr int H = 2 * G;
  const int64_t nb = a.in / kQK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ8x16* xgs[G];
  for (int q = 0; q < G; ++q) xgs[q] = a.xg8 + (g + q) * nb;
  const auto xq = [&](int64_t b, int i, int h) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(xgs[h / 2][b].q[i] + 8 * (h % 2)));
  };
  alignas(32) __m256 acc[R][H];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    alignas(32) int32_t levels[R][kQK / 4];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + kPrefetchBytes, _MM_HINT_T0);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r]), levels_of<W>(w[r][b]));
    }
    // Opaque from here on, so each dword is broadcast from memory (a load, no shuffle).
    asm("" : "+m"(levels));
    alignas(32) __m256i s[R][H];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) s[r][h] = _mm256_setzero_si256();
    if constexpr (kRunB8<W> > 1) {
      // Plain AVX2: vpmaddubsw's pair sums added in int16 over runs of kRunB8 quads,
      // then one vpmaddwd by 1 per run: the same integers with fewer multiplies.
      constexpr bool kSumsInMemory = R * H > 4 && kRunB8<W> < kQK / 4;
      __m256i* sp = &s[0][0];
      if constexpr (kSumsInMemory) asm("" : "+r"(sp) : : "memory");
      for (int i0 = 0; i0 < kQK / 4; i0 += kRunB8<W>) {
        __m256i p[R][H];
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < H; ++h) p[r][h] = _mm256_setzero_si256();
        for (int i = i0; i < i0 + kRunB8<W>; ++i) {
          __m256i xv[H];
          for (int h = 0; h < H; ++h) xv[h] = xq(b, i, h);
          // 4 halves: the activations stay in registers for both rows.
          if constexpr (H > 2)
            for (int h = 0; h < H; ++h) asm("" : "+x"(xv[h]));
          for (int r = 0; r < R; ++r) {
            const __m256i wb = _mm256_set1_epi32(levels[r][i]);
            for (int h = 0; h < H; ++h) p[r][h] = chain_add_epi16(p[r][h], _mm256_maddubs_epi16(wb, xv[h]));
          }
        }
        const __m256i ones = _mm256_set1_epi16(1);
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < H; ++h) {
            if constexpr (kSumsInMemory) {
              __m256i* si = sp + r * H + h;
              _mm256_store_si256(si, _mm256_add_epi32(_mm256_load_si256(si), _mm256_madd_epi16(p[r][h], ones)));
            } else {
              s[r][h] = chain_add_epi32(s[r][h], _mm256_madd_epi16(p[r][h], ones));
            }
          }
      }
      if constexpr (kSumsInMemory) asm("" : : : "memory");
    } else {
      for (int i = 0; i < kQK / 4; ++i) {
        __m256i xv[H];
        for (int h = 0; h < H; ++h) xv[h] = xq(b, i, h);
        for (int r = 0; r < R; ++r) {
          const __m256i wb = _mm256_set1_epi32(levels[r][i]);
          for (int h = 0; h < H; ++h) s[r][h] = dot_levels_acc<W>(s[r][h], wb, xv[h]);
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const ActQ8x16& xb = xgs[h / 2][b];
      const __m256i off = offset_of<W>(_mm256_load_si256(reinterpret_cast<const __m256i*>(xb.sum + 8 * (h % 2))));
      const __m256 xd = _mm256_load_ps(xb.d + 8 * (h % 2));
      for (int r = 0; r < R; ++r) {
        const __m256 dwx = _mm256_mul_ps(_mm256_set1_ps(block_scale<W>(w[r][b])), xd);
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s[r][h], off)), dwx, acc[r][h]);
      }
    }
    if constexpr (R * H > 4) asm("" : "+m"(acc));  // more than 4 (row, half) pairs: the accumulators live in memory
  }
  // Written out here, not through a shared helper: one taking acc by pointer measured
  // 2% slower (Q4_0, Q4_K 2048x2048 x 64 tokens), one taking the array drew -Warray-bounds.
  for (int q = 0; q < G; ++q) {
    const int64_t tg = (g + q) * 16;
    const int n = static_cast<int>(std::min<int64_t>(16, a.n_tokens - tg));
    for (int r = 0; r < nr; ++r) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, acc[r][2 * q]);
      _mm256_store_ps(lanes + 8, acc[r][2 * q + 1]);
      for (int l = 0; l < n; ++l) a.y[(tg + l) * a.out + o + r] = lanes[l];
    }
  }
}

// Plain AVX2 (blocks in runs: Q4_0, Q5_0): 2 rows x 2 groups (32 tokens) per pass, as
// the K-quants do, 4 activation vectors per 2 broadcast dwords instead of 2. Zen 3, one
// thread, against 1 group: Q5_0 (4 rows measured 0.92-0.94x before) 2048x2048 x 64
// tokens 66 -> 74 GMAC/s, 576x1536 x 32 62 -> 69; Q4_0 (4 rows before) 88.7 -> 94.5,
// 82 -> 88. A last odd group: Q4_0 (one run per block) in 4 rows, the run's int16 sums
// and the operands in registers (8 + 3), so the group's activations serve 4 rows; the
// others in 2. VNNI and IQ4_NL's signed bytes: single groups of 2 rows (not measured).
template <class W>
constexpr int kGroupsB8 = kRunB8<W> > 1 ? 2 : 1;
template <class W>
constexpr int kRowsB8Single = kRunB8<W> == kQK / 4 ? 4 : 2;

template <class W>
void range_b8(const MatmulArgs& a, int64_t o0, int64_t o1) {
  constexpr int G = kGroupsB8<W>;
  constexpr int R = G > 1 ? 2 : kRowsB8Single<W>;
  constexpr int R1 = kRowsB8Single<W>;
  for_group_tiles<G, R, R1>(
      a.n_groups8, o0, o1, [&](int64_t o, int nr, int64_t g) { rows_group16_b8<W, R, G>(a, o, nr, g); },
      [&](int64_t o, int nr, int64_t g) { rows_group16_b8<W, R1>(a, o, nr, g); });
  const int64_t first = std::min(a.n_tokens, a.n_groups8 * 16);
  if (first < a.n_tokens) rows_tokens_b8<W>(a, o0, o1, first, a.n_tokens);
}

/// range_b8 for Q4_0, Q5_0, IQ4_NL and MXFP4, else nullptr.
inline MatmulRangeFn b8_kernel(DType type) {
  if (type == kMxfp4) return range_b8<MXFP4U>;  // no enumerator to switch on
  switch (type) {
    case DType::q4_0: return range_b8<Q4_0U>;
    case DType::q5_0: return range_b8<Q5_0U>;
    case DType::iq4_nl: return range_b8<IQ4_NLU>;
    default: return nullptr;
  }
}
#endif

}  // namespace
}  // namespace troupe::kernels::cpu
