// The matmul kernels of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, IQ4_NL) for AVX2, included by the translation units that build them: plain
// AVX2/FMA/F16C (matmul_avx2.cpp) and the same with AVX-VNNI
// (matmul_avx2_vnni.cpp), whose only difference is dot_pairs_acc; the AVX-512
// VNNI unit (matmul_avx512_vnni.cpp) takes the single-token kernels from here
// and has its own batched ones. Everything
// here has internal linkage, so each unit keeps its own instructions.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "matmul_q8_avx2.hpp is for translation units built with -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul_impl.hpp"

namespace troupe::kernels::cpu {
namespace {

// vpdpbusd (AVX-VNNI or AVX-512 VNNI): byte products summed in int32. Without it,
// vpmaddubsw adds pairs into int16 with saturation (2 x 255 x 127 overflows).
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
constexpr bool kHaveDpbusd = true;
#else
constexpr bool kHaveDpbusd = false;
#endif

// How far ahead of the current block each weight row is prefetched. Decode reads 8
// adjacent rows at once, so a row's stream advances 8x slower than the weights are
// read: 8 KiB ahead of one row is ~3 KiB ahead of the reading in SmolLM2-135M's
// matrices. Measured (troupe_bench_e2e, decode): 512 -> 8192 bytes, +37% with 1 thread
// and +40% with 2; 16384 gains nothing more.
constexpr int kPrefetchBytes = 8192;

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// Prefetch of the next 8-row tile of a decode kernel. When its rows are short (the
// tile within 16 KiB: 2048 inputs at 4 to 6.6 bits), the tile is one span of memory,
// prefetched front to back, each line once, a share per block step (step(b)). Asked
// per row and step instead, the same lines are asked for again and again, and a
// span that big beside the tile being read crowds L1; measured on plain AVX2 (Zen 3),
// Q4_0 decode of 2048 x 8192 went 1.1-1.4x, Q4_K 1.1-1.5x, Gemma 3's Q8_0 head (640 x
// 262144) 1.6x (10.8-11.8 -> 17.5-22.2 GB/s on 2 threads). Longer rows keep the
// kernels' per-row prefetches a tile ahead (by_span false), which measured better
// there, and so do the VNNI builds, where this has not been measured.
struct NextTilePrefetch {
  const char* next;
  int64_t span, nb, done = 0;
  bool by_span;
  NextTilePrefetch(const MatmulArgs& a, int64_t o, int64_t n_blocks)
      : next(reinterpret_cast<const char*>(a.w + (o + 8) * a.w_row_stride)),
        span(8 * a.w_row_stride),
        nb(n_blocks),
        by_span(!kHaveDpbusd && span <= 16384) {}
  void step(int64_t b) {
    if (!by_span) return;
    // The lines below span * (b + 1) / nb, without a 64-bit division per block.
    for (const int64_t until = span * (b + 1); (done + 1) * nb <= until; done += 64) _mm_prefetch(next + done, _MM_HINT_T0);
  }
};

// The batched tiles' walk over groups of 16 tokens: G groups at a time over rows
// [o0, o1) in tiles of R rows (tile(o, nr, g) of those), then the groups left over one
// at a time in tiles of R1 rows (single(o, nr, g)).
template <int G, int R, int R1, class Tile, class Single>
inline void for_group_tiles(int64_t n_groups, int64_t o0, int64_t o1, Tile tile, Single single) {
  int64_t g = 0;
  for (; g + G <= n_groups; g += G)
    for (int64_t o = o0; o < o1; o += R) tile(o, static_cast<int>(std::min<int64_t>(R, o1 - o)), g);
  for (; g < n_groups; ++g)
    for (int64_t o = o0; o < o1; o += R1) single(o, static_cast<int>(std::min<int64_t>(R1, o1 - o)), g);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 nibbles -> 32 bytes: low nibbles (elements 0..15) then high ones (16..31).
// (Broadcast load + per-lane variable shift: one uop fewer than an insert.)
inline __m256i nibbles32(const uint8_t* qs) {
  const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi32(t, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// Two adjacent halves (d, m) converted together: lane 0 = d, lane 1 = m.
inline __m128 half_pair(const uint16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(v)));
}

// Byte j of the result: 0x10 where bit j % 8 of byte ctrl[j] of `bits` (within its
// 128-bit half) is set, else 0.
inline __m256i bit_bytes16(__m256i bits, __m256i ctrl) {
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(bits, ctrl), mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The 32 fifth bits of a Q5 block as 0x10 in the bytes whose bit is set.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return bit_bytes16(_mm256_set1_epi32(static_cast<int>(bits)),
                     _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                      3, 3, 3, 3, 3));
}

// Weight traits of the 32-element types: quants as bytes (signed for type-0,
// raw unsigned levels for type-1), scale, min.
struct Q4_0W {
  using Block = BlockQ4_0;
  static constexpr bool kSigned = true, kMin = false, kBytesInBlock = false;
  static __m256i q(const Block& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block&) { return 0.0f; }
};
struct Q4_1W {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false, kMin = true, kBytesInBlock = false;
  static __m256i q(const Block& b) { return nibbles32(b.qs); }
  static __m128 dm(const Block& b) { return half_pair(&b.d); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block& b) { return h2f(b.m); }
};
struct Q5_0W {
  using Block = BlockQ5_0;
  static constexpr bool kSigned = true, kMin = false, kBytesInBlock = false;
  static __m256i q(const Block& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), fifth_bits(b.qh)), _mm256_set1_epi8(16));
  }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block&) { return 0.0f; }
};
struct Q5_1W {
  using Block = BlockQ5_1;
  static constexpr bool kSigned = false, kMin = true, kBytesInBlock = false;
  static __m256i q(const Block& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits(b.qh)); }
  static __m128 dm(const Block& b) { return half_pair(&b.d); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block& b) { return h2f(b.m); }
};
struct Q8_0W {
  using Block = BlockQ8_0;
  // kBytesInBlock: the levels are the block's signed bytes (widen loads them directly).
  static constexpr bool kSigned = true, kMin = false, kBytesInBlock = true;
  static __m256i q(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block&) { return 0.0f; }
};

// The kernels below compute matmul_impl.hpp's per-(row, token) arithmetic
// exactly: the integer block dot product is exact whatever the order of its
// sums, and the float steps are the same fma chain in block order.

// Weight block levels as 16-bit integers in element order: lo = 0..15, hi = 16..31.
template <class W>
inline void widen(const typename W::Block& blk, __m256i* lo, __m256i* hi) {
  if constexpr (W::kBytesInBlock) {
    // Each half widened straight from memory (vpmovsxbw ymm, m128). Widening a 32-byte
    // load instead, GCC loaded the block twice and added an extract: 3 more uops on the
    // shuffle pipes per block, which halved the rate of Q8_0 decode (one thread, 2048 x
    // 1024 from L3: 14-19 -> 28 GB/s).
    *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs)));
    *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16)));
    return;
  }
  const __m256i q = W::q(blk);
  if constexpr (W::kSigned) {
    *lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
    *hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
  } else {
    *lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(q));
    *hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(q, 1));
  }
}

// acc + p, kept in the order written. GCC reassociates a chain of integer vector adds
// into a tree: it then computes every product of an unrolled loop first and spills them
// to the stack, which made the plain AVX2 kernels run at a third of the multiply
// rate. The empty asm makes each sum opaque, so the chain stays a chain in registers.
inline __m256i chain_add_epi32(__m256i acc, __m256i p) {
  acc = _mm256_add_epi32(acc, p);
  asm("" : "+x"(acc));
  return acc;
}
inline __m256i chain_add_epi16(__m256i acc, __m256i p) {
  acc = _mm256_add_epi16(acc, p);
  asm("" : "+x"(acc));
  return acc;
}

// acc + the sums of adjacent 16-bit products (one VNNI instruction where available).
inline __m256i dot_pairs_acc(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, a, b);
#else
  return chain_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Lane r = the sum of the 8 lanes of p[r].
inline __m256i reduce8_epi32(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
  const __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);  // [rows 0..3 low halves | rows 0..3 high halves]
  const __m256i b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Scales (and mins) of block b of 8 rows as float vectors. Every block type
// starts with its f16 scale d; type-1 blocks follow it with the f16 min m.
template <class W>
inline void scales8(const typename W::Block* const* wr, int64_t b, __m256* d, __m256* m) {
  if constexpr (W::kMin) {
    uint32_t dm[8];
    for (int r = 0; r < 8; ++r) std::memcpy(&dm[r], &wr[r][b], 4);
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dm));
    // Per 128-bit lane [d0 m0 d1 m1 d2 m2 d3 m3] -> [d0 d1 d2 d3 m0 m1 m2 m3], then the d quads first.
    v = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8,
                                                9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    v = _mm256_permute4x64_epi64(v, 0xD8);
    *d = _mm256_cvtph_ps(_mm256_castsi256_si128(v));
    *m = _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1));
  } else {
    uint16_t h[8];
    for (int r = 0; r < 8; ++r) std::memcpy(&h[r], &wr[r][b], 2);
    *d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
    *m = _mm256_setzero_ps();
  }
}

// Decode: 8 rows x one token, rows in lanes. The 8 rows are adjacent, so the
// weights still stream sequentially; y[t][o..o+7] is written at once.
template <class W>
inline void rows8_token(const MatmulArgs& a, int64_t o, int64_t t) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* wr[8];
  for (int r = 0; r < 8; ++r) wr[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const auto* x = reinterpret_cast<const ActQ16*>(a.xq + t * a.xq_row_bytes);
  // At least a whole tile ahead: wide rows would otherwise prefetch inside the tile
  // (8 KiB of a 1536-wide Q8_0 row is 5 rows on). Measured: decode of 1536x576 Q8_0,
  // 58 -> 40 us on 2 threads.
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  // Short rows (Gemma 3's 640-wide Q8_0 head): the next tile by span, each line once.
  NextTilePrefetch pf(a, o, nb);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    pf.step(b);
    const __m256i xlo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i xhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 16));
    __m256i p[8];
    for (int r = 0; r < 8; ++r) {
      if (!pf.by_span) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + b) + ahead, _MM_HINT_T0);
      __m256i lo, hi;
      widen<W>(wr[r][b], &lo, &hi);
      // |w| <= 127 and |x| <= 32767: a pair of products fits an int32 lane many times over.
      p[r] = _mm256_add_epi32(_mm256_madd_epi16(lo, xlo), _mm256_madd_epi16(hi, xhi));
    }
    __m256 d, m;
    scales8<W>(wr, b, &d, &m);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(p)), _mm256_mul_ps(d, _mm256_set1_ps(x[b].d)), acc);
    if constexpr (W::kMin) acc = _mm256_fmadd_ps(m, _mm256_set1_ps(x[b].s), acc);
  }
  _mm256_storeu_ps(a.y + t * a.out + o, acc);
}

// One row x one token (row tails), the same operations one lane at a time.
template <class W>
inline void row_token(const MatmulArgs& a, int64_t o, int64_t t) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const auto* w = reinterpret_cast<const Block*>(a.w + o * a.w_row_stride);
  const auto* x = reinterpret_cast<const ActQ16*>(a.xq + t * a.xq_row_bytes);
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i lo, hi;
    widen<W>(w[b], &lo, &hi);
    const __m256i p =
        _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs))),
                         _mm256_madd_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 16))));
    acc = std::fma(static_cast<float>(hsum_epi32(p)), W::d(w[b]) * x[b].d, acc);
    if constexpr (W::kMin) acc = std::fma(W::m(w[b]), x[b].s, acc);
  }
  a.y[t * a.out + o] = acc;
}

template <class W>
inline void rows_token(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t) {
  int64_t o = o0;
  for (; o + 8 <= o1; o += 8) rows8_token<W>(a, o, t);
  for (; o < o1; ++o) row_token<W>(a, o, t);
}

// Small batches: 8 rows x T tokens (2..4), rows in lanes. Each row's block is widened
// once into a small buffer and meets the T tokens' activations from there (memory
// operands), each token's 8 sums reduced as rows8_token's. Tokens one at a time read
// every row once per token (Zen 3, one thread, 2048 x 1024, Q4_1 at 1, 2 and 3 tokens
// all 15.6 GMAC/s).
template <class W, int T>
inline void rows8_tokens_q16(const MatmulArgs& a, int64_t o, int64_t t0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* wr[8];
  for (int r = 0; r < 8; ++r) wr[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ16* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ16*>(a.xq + (t0 + t) * a.xq_row_bytes);
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  NextTilePrefetch pf(a, o, nb);
  alignas(32) int16_t levels[8][kQK];
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    pf.step(b);
    for (int r = 0; r < 8; ++r) {
      if (!pf.by_span) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + b) + ahead, _MM_HINT_T0);
      __m256i lo, hi;
      widen<W>(wr[r][b], &lo, &hi);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r]), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r] + 16), hi);
    }
    asm("" : "+m"(levels));  // read back as memory operands, once per token
    __m256 d, m;
    scales8<W>(wr, b, &d, &m);
    for (int t = 0; t < T; ++t) {
      const __m256i xlo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
      const __m256i xhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs + 16));
      __m256i p[8];
      for (int r = 0; r < 8; ++r)
        p[r] = _mm256_add_epi32(
            _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(levels[r])), xlo),
            _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(levels[r] + 16)), xhi));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(p)), _mm256_mul_ps(d, _mm256_set1_ps(x[t][b].d)), acc[t]);
      if constexpr (W::kMin) acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(x[t][b].s), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.y + (t0 + t) * a.out + o, acc[t]);
}

// Rows [o0, o1) x tokens [t0, t1): per 8-row block, passes of up to 4 tokens (one token:
// rows8_token); the last rows one at a time.
template <class W>
inline void rows_tokens_q16(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
  int64_t o = o0;
  for (; o + 8 <= o1; o += 8) {
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) rows8_tokens_q16<W, 4>(a, o, t);
    switch (t1 - t) {
      case 3: rows8_tokens_q16<W, 3>(a, o, t); break;
      case 2: rows8_tokens_q16<W, 2>(a, o, t); break;
      case 1: rows8_token<W>(a, o, t); break;
      default: break;
    }
  }
  for (; o < o1; ++o)
    for (int64_t t = t0; t < t1; ++t) row_token<W>(a, o, t);
}

// Batches: R rows x G groups of 8 tokens, tokens in lanes (rows from nr on repeat row 0,
// computed, never stored). Per block each row's levels are widened once into a small
// buffer; each pair of levels is broadcast (a load, no shuffle) and multiplied with G
// groups' pairs, so the lanes end up holding whole block sums: no horizontal sums, and
// one float step per block for 8 tokens. Each group's pairs are loaded once for the R
// rows: with one row, 32 bytes of activations came from L2 per vpmaddwd and capped the
// multiply rate (plain AVX2 on Zen 3, troupe_bench_kernels Q8_0 2048x2048 and 8192x2048,
// 32 and 128 tokens, one thread: 1 row 25-28 GMAC/s, 2 rows 31-34; 4 rows x 2 groups
// measured no better than 1 row).
template <class W, int R, int G>
inline void rows_groups(const MatmulArgs& a, int64_t o, int nr, int64_t g0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ16x8* xg[G];
  for (int g = 0; g < G; ++g) xg[g] = a.xg + (g0 + g) * nb;
  alignas(32) int16_t levels[R][kQK];
  // The float accumulators live in the tile's memory: the block sums and the operands
  // take the registers (R x G + G + 1).
  alignas(32) __m256 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + kPrefetchBytes, _MM_HINT_T0);
      __m256i lo, hi;
      widen<W>(w[r][b], &lo, &hi);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r]), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r] + 16), hi);
    }
    asm("" : "+m"(levels));  // each pair broadcast from memory (a load), not extracted
    __m256i s[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) s[r][g] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int i = 0; i < kQK / 2; ++i) {
      __m256i xv[G];
      for (int g = 0; g < G; ++g) xv[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xg[g][b].q[i]));
      for (int r = 0; r < R; ++r) {
        const __m256i wp = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(levels[r] + 2 * i)));
        for (int g = 0; g < G; ++g) s[r][g] = dot_pairs_acc(s[r][g], wp, xv[g]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 dw = _mm256_set1_ps(W::d(w[r][b]));
      for (int g = 0; g < G; ++g)
        acc[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][g]), _mm256_mul_ps(dw, _mm256_load_ps(xg[g][b].d)), acc[r][g]);
      if constexpr (W::kMin) {
        const __m256 mw = _mm256_set1_ps(W::m(w[r][b]));
        for (int g = 0; g < G; ++g) acc[r][g] = _mm256_fmadd_ps(mw, _mm256_load_ps(xg[g][b].s), acc[r][g]);
      }
    }
    asm("" : "+m"(acc));
  }
  for (int r = 0; r < nr; ++r)
    for (int g = 0; g < G; ++g) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[r][g]);
      const int64_t t0 = (g0 + g) * 8;
      const int n = static_cast<int>(std::min<int64_t>(8, a.n_tokens - t0));
      for (int l = 0; l < n; ++l) a.y[(t0 + l) * a.out + o + r] = lanes[l];
    }
}

constexpr int kGroupsPerPass = 4;  // 32 tokens per pass over the rows
constexpr int kRowsPerTile = 2;    // 8 block sums, 4 groups' pairs and a broadcast: 13 registers

template <class W>
void range_q8(const MatmulArgs& a, int64_t o0, int64_t o1) {
  // One pass of groups at a time over all the rows: the weights of a thread's rows
  // are read once per 32 tokens.
  for (int64_t c0 = 0; c0 < a.n_groups; c0 += kGroupsPerPass) {
    const int64_t c1 = std::min(a.n_groups, c0 + kGroupsPerPass);
    for (int64_t o = o0; o < o1; o += kRowsPerTile) {
      const int nr = static_cast<int>(std::min<int64_t>(kRowsPerTile, o1 - o));
      int64_t g = c0;
      for (; g + kGroupsPerPass <= c1; g += kGroupsPerPass) rows_groups<W, kRowsPerTile, kGroupsPerPass>(a, o, nr, g);
      for (; g + 2 <= c1; g += 2) rows_groups<W, kRowsPerTile, 2>(a, o, nr, g);
      for (; g < c1; ++g) rows_groups<W, kRowsPerTile, 1>(a, o, nr, g);
    }
  }
  rows_tokens_q16<W>(a, o0, o1, std::min(a.n_tokens, a.n_groups * 8), a.n_tokens);
}

/// range_q8 for a 32-element block type that meets ActQ16 activations (Q4_1, Q5_1,
/// Q8_0), else nullptr (Q4_0, Q5_0 and IQ4_NL meet ActQ8: matmul_q4q5_avx2.hpp).
inline MatmulRangeFn q8_kernel(DType type) {
  switch (type) {
    case DType::q4_1: return range_q8<Q4_1W>;
    case DType::q5_1: return range_q8<Q5_1W>;
    case DType::q8_0: return range_q8<Q8_0W>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
