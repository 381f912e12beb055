// The Q4_K, Q5_K and Q6_K matmul kernels against ActQ8K (8-bit) activations, included by
// the AVX2 translation units: plain AVX2 (matmul_avx2.cpp), AVX-VNNI
// (matmul_avx2_vnni.cpp) and AVX-512 VNNI (matmul_avx512_vnni.cpp). They differ in
// dot_pairs_acc only (matmul_q8_avx2.hpp: vpmaddwd + vpaddd, or one vpdpwssd).
//
// Every lane computes matmul_impl.hpp's per-(row, token) arithmetic of the
// group-scaled K-quants exactly: per super-block the exact integer sums S (and M, the
// mins' term of Q4_K) are reduced to one int each, then
//   acc = fma(float(S), d_w * d_x, acc);  acc = fma(-float(M), dmin_w * d_x, acc)
// in super-block order (Q4_K combines the two terms first: q4k_step), so the results
// are bit-identical to the portable kernels and independent of the tile, the batch
// and the ISA.
//
// A tile is R rows x T tokens with R * T = 8 (8 rows for decode, 1 row x 8 tokens
// for prefill): a weight super-block is unpacked once for T tokens, and the 8
// (row, token) integer sums are reduced together with hadd (reduce8_epi32), so one
// float step per super-block serves 8 outputs with no per-output horizontal sum.
#pragma once

#include <cstddef>
#include <type_traits>

#include "kernels/cpu/matmul_q8_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

inline __m256i load256u(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The 8 6-bit scales and mins of a Q4_K block as bytes (q4k_scale_min for all j at once).
inline void q4k_scales_mins(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  constexpr uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
  const uint32_t sc_hi = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
  *sc = (u[0] & m6) | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = (u[1] & m6) | (static_cast<uint64_t>(mn_hi) << 32);
}

// shuffle_epi8 control that broadcasts 16-bit word j of each 128-bit lane.
inline __m256i word_ctrl(int j) { return _mm256_set1_epi16(static_cast<int16_t>((2 * j) | ((2 * j + 1) << 8))); }

// Prefetch one weight block (up to 210 bytes: 4 lines) `ahead` bytes on.
template <int kBytes>
inline void prefetch_block(const void* p, int64_t ahead) {
  const char* c = static_cast<const char*>(p) + ahead;
  for (int off = 0; off < kBytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

// The pointers of a tile: rows o.. and tokens t0..; lanes past the valid rows/tokens
// repeat the first one (computed, never stored), so tails reuse the same code.
template <class Block, int R, int T>
struct KTile {
  const Block* w[R];
  const ActQ8K* x[T];
  KTile(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ8K*>(a.xq + (t0 + (t < nt ? t : 0)) * a.xq_row_bytes);
  }
};

// One super-block's float factors of an R x T tile, lane k = t * R + r: the row's d and
// dmin (0 for types without mins), the token's activation scale.
template <int R, int T>
struct LaneScales {
  alignas(32) float dw[8], dm[8], dx[8];
  void set(int r, float d, float dmin, const ActQ8K* const* x, int64_t b) {
    for (int t = 0; t < T; ++t) {
      dw[t * R + r] = d;
      dm[t * R + r] = dmin;
      dx[t * R + r] = x[t][b].d;
    }
  }
};

// The decode tiles (8 rows x 1 token) take the rows' d (and dmin) straight from the 8
// blocks in memory instead: LaneScales' 8 scalar stores and one 32-byte load of them
// cannot be forwarded, and that load waited for the stores every super-block (one
// thread, 2048 x 256 from L2: Q4_K 16.0 -> 17.2 GB/s, Q5_K 15.2 -> 15.9).
inline int load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The f16 at byte `offset` of block b of each of 8 rows, as floats (GCC builds the
// vector with vmovd/vpinsrw from the loads: no stores to forward).
template <class Block>
inline __m256 halves8(const Block* const* w, int64_t b, size_t offset) {
  const auto at = [&](int r) {
    return static_cast<int16_t>(load_u16(reinterpret_cast<const uint8_t*>(&w[r][b]) + offset));
  };
  return _mm256_cvtph_ps(_mm_setr_epi16(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)));
}

// d and dmin, the two halves that start a Q4_K/Q5_K (or Q2_K-style) block at `offset`,
// of block b of 8 rows.
template <class Block>
inline void dmin_pairs8(const Block* const* w, int64_t b, size_t offset, __m256* d, __m256* m) {
  const auto at = [&](int r) {
    uint32_t v;
    std::memcpy(&v, reinterpret_cast<const uint8_t*>(&w[r][b]) + offset, 4);
    return static_cast<int>(v);
  };
  // Per half of the rows [d0 m0 d1 m1 d2 m2 d3 m3] -> [d0 d1 d2 d3 m0 m1 m2 m3].
  const __m128i ctrl = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  // Inserted one by one: _mm_setr_epi32 measured 2-3% slower here (GCC spilled more).
  const auto rows4 = [&](int r0) {
    __m128i v = _mm_cvtsi32_si128(at(r0));
    v = _mm_insert_epi32(v, at(r0 + 1), 1);
    v = _mm_insert_epi32(v, at(r0 + 2), 2);
    return _mm_insert_epi32(v, at(r0 + 3), 3);
  };
  const __m128i lo = _mm_shuffle_epi8(rows4(0), ctrl);
  const __m128i hi = _mm_shuffle_epi8(rows4(4), ctrl);
  *d = _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
  *m = _mm256_cvtph_ps(_mm_unpackhi_epi64(lo, hi));
}

// Lane k = t * R + r of acc to y[t0 + t][o + r], valid lanes only.
template <int R, int T>
inline void store_lanes(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt, __m256 acc) {
  if (R == 8 && nr == 8) {
    _mm256_storeu_ps(a.y + t0 * a.out + o, acc);
    return;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (int t = 0; t < T && t < nt; ++t)
    for (int r = 0; r < R && r < nr; ++r) a.y[(t0 + t) * a.out + o + r] = lanes[t * R + r];
}

// Q4_K's float step (matmul_impl.hpp): the super-block's two terms, which largely cancel,
// are combined with one rounding before they meet the accumulator.
inline __m256 q4k_step(__m256 acc, __m256i s, __m256i m, __m256 dwx, __m256 dmx) {
  return _mm256_add_ps(acc, _mm256_fmsub_ps(_mm256_cvtepi32_ps(s), dwx, _mm256_mul_ps(_mm256_cvtepi32_ps(m), dmx)));
}

// Q5_K's float step (matmul_impl.hpp): the two terms one after the other, as the
// portable kernel has them (fnmadd(m, dmx, a) is fma(-m, dmx, a) exactly).
inline __m256 q5k_step(__m256 acc, __m256i s, __m256i m, __m256 dwx, __m256 dmx) {
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), dmx, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dwx, acc));
}

// One super-block's float step of an 8-lane tile: the lanes' integer sums S (and the
// min sums M) reduced, then the type's step (matmul_impl.hpp) with the lanes' factors.
enum class KStep { plain, q4k, q5k };
template <KStep kStep>
inline __m256 tile_step(__m256 acc, __m256i* s, __m256i* m, __m256 dw, __m256 dm, __m256 dxv) {
  const __m256 dwx = _mm256_mul_ps(dw, dxv);
  if constexpr (kStep == KStep::plain) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(s)), dwx, acc);
  } else {
    const __m256 dmx = _mm256_mul_ps(dm, dxv);
    if constexpr (kStep == KStep::q4k) return q4k_step(acc, reduce8_epi32(s), reduce8_epi32(m), dwx, dmx);
    return q5k_step(acc, reduce8_epi32(s), reduce8_epi32(m), dwx, dmx);
  }
}
template <KStep kStep, int R, int T>
inline __m256 tile_step(__m256 acc, __m256i* s, __m256i* m, const LaneScales<R, T>& ls) {
  return tile_step<kStep>(acc, s, m, _mm256_load_ps(ls.dw), _mm256_load_ps(ls.dm), _mm256_load_ps(ls.dx));
}

// The float step of an 8-row decode tile of a type without mins, d at byte `d_offset`.
template <class Block>
inline __m256 plain_step8(__m256 acc, __m256i* s, const Block* const* w, int64_t b, size_t d_offset,
                          const ActQ8K* x) {
  const __m256 dw = halves8(w, b, d_offset);
  return tile_step<KStep::plain>(acc, s, nullptr, dw, dw, _mm256_set1_ps(x[b].d));
}

// Bit `bit` of each of the 32 bytes of qh, as 16 (the fifth bit of Q5_K's levels).
// One 16-bit shift takes the bit to bit 4: bits that cross into the
// neighbouring byte land below bit 4 (left shifts) or above it (right shifts), and the
// mask drops them (2 operations instead of 3; Q5_K unpacks 8 of these per block).
inline __m256i q5k_high(__m256i qh, int bit) {
  const __m256i moved = bit <= 4 ? _mm256_slli_epi16(qh, 4 - bit) : _mm256_srli_epi16(qh, bit - 4);
  return _mm256_and_si256(moved, _mm256_set1_epi8(0x10));
}

// Q4_K, and Q5_K (kQ5): chunk c of qs holds sub-block 2c in its low nibbles and 2c + 1
// in its high ones; Q5_K adds bits 2c and 2c + 1 of qh[0..31] as their fifth bits.
template <bool kQ5, int R, int T>
void tile_q45k(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const KTile<Block, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  NextTilePrefetch pf(a, o, nb);  // decode tiles (8 rows): by span when rows are short
  const bool per_row = R != 8 || !pf.by_span;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8], m[8];
    LaneScales<R, T> ls;
    if (!per_row) pf.step(b);
    for (int r = 0; r < R; ++r) {
      const Block& blk = k.w[r][b];
      if (per_row) prefetch_block<sizeof(Block)>(&blk, ahead);
      uint64_t sc, mn;
      q4k_scales_mins(blk.scales, &sc, &mn);
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
      // mins per 16 elements (the bsums' groups): each sub-block's min twice.
      const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(mn)), dup));
      for (int t = 0; t < T; ++t) s[t * R + r] = _mm256_setzero_si256();
      __m256i qh = _mm256_setzero_si256();
      if constexpr (kQ5) qh = load256u(blk.qh);
      for (int c = 0; c < 4; ++c) {
        const __m256i qb = load256u(blk.qs + 32 * c);
        __m256i lo = _mm256_and_si256(qb, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qb, 4), low4);
        if constexpr (kQ5) {
          lo = _mm256_or_si256(lo, q5k_high(qh, 2 * c));
          hi = _mm256_or_si256(hi, q5k_high(qh, 2 * c + 1));
        }
        const __m256i s_lo = _mm256_shuffle_epi8(sc16, word_ctrl(2 * c));
        const __m256i s_hi = _mm256_shuffle_epi8(sc16, word_ctrl(2 * c + 1));
        for (int t = 0; t < T; ++t) {
          // levels <= 31, |x| <= 127: the byte pairs' sums fit int16 (no saturation).
          __m256i& acc_i = s[t * R + r];
          acc_i = dot_pairs_acc(acc_i, _mm256_maddubs_epi16(lo, load256u(k.x[t][b].qs + 64 * c)), s_lo);
          acc_i = dot_pairs_acc(acc_i, _mm256_maddubs_epi16(hi, load256u(k.x[t][b].qs + 64 * c + 32)), s_hi);
        }
      }
      for (int t = 0; t < T; ++t) m[t * R + r] = _mm256_madd_epi16(load256u(k.x[t][b].bsums), mn16);
      if constexpr (R != 8) ls.set(r, h2f(blk.d), h2f(blk.dmin), k.x, b);
    }
    if constexpr (R == 8) {
      __m256 dw, dm;
      dmin_pairs8(k.w, b, offsetof(Block, d), &dw, &dm);
      acc = tile_step<kQ5 ? KStep::q5k : KStep::q4k>(acc, s, m, dw, dm, _mm256_set1_ps(k.x[0][b].d));
    } else {
      acc = tile_step<kQ5 ? KStep::q5k : KStep::q4k>(acc, s, m, ls);
    }
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

// Bits 2j and 2j + 1 of every byte of qh at bits 4 and 5 (Q6_K's high bits of run j),
// by one 16-bit shift and a mask, as q5k_high: what crosses bytes falls outside the mask.
inline __m256i q6k_high(__m256i qh, int j) {
  const __m256i moved = j <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * j) : _mm256_srli_epi16(qh, 2 * j - 4);
  return _mm256_and_si256(moved, _mm256_set1_epi8(0x30));
}

// Q6_K: levels 0..63 through maddubs; the -32 comes back exactly through the bsums.
// Half h: ql[64h..] and qh[32h..] give 4 runs of 32 elements (groups 8h + 2j, + 1).
template <int R, int T>
void tile_q6k(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  const KTile<BlockQ6_K, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  NextTilePrefetch pf(a, o, nb);  // decode tiles (8 rows): by span when rows are short
  const bool per_row = R != 8 || !pf.by_span;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8];
    LaneScales<R, T> ls;
    if (!per_row) pf.step(b);
    for (int r = 0; r < R; ++r) {
      const BlockQ6_K& blk = k.w[r][b];
      if (per_row) prefetch_block<sizeof(BlockQ6_K)>(&blk, ahead);
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      for (int t = 0; t < T; ++t)  // - 32 * sum_g sc[g] * bsums[g]
        s[t * R + r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_slli_epi32(_mm256_madd_epi16(load256u(k.x[t][b].bsums), sc16), 5));
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256u(blk.ql + 64 * h), ql1 = load256u(blk.ql + 64 * h + 32);
        const __m256i qh = load256u(blk.qh + 32 * h);
        // Scales 8h..8h+7 in both 128-bit lanes; run j takes 8h + 2j (low lane) and + 1 (high).
        const __m256i sch = _mm256_broadcastsi128_si256(
            _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales + 8 * h))));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), q6k_high(qh, 0));
        q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), q6k_high(qh, 1));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), q6k_high(qh, 2));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), q6k_high(qh, 3));
        for (int j = 0; j < 4; ++j) {
          const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * j + 2) | ((4 * j + 3) << 8))),
                                                _mm_set1_epi16(static_cast<int16_t>((4 * j) | ((4 * j + 1) << 8))));
          const __m256i sj = _mm256_shuffle_epi8(sch, ctrl);
          for (int t = 0; t < T; ++t) {
            // levels <= 63, |x| <= 127: pair sums <= 16002 fit int16.
            __m256i& acc_i = s[t * R + r];
            acc_i = dot_pairs_acc(acc_i, _mm256_maddubs_epi16(q[j], load256u(k.x[t][b].qs + 128 * h + 32 * j)), sj);
          }
        }
      }
      if constexpr (R != 8) ls.set(r, h2f(blk.d), 0.0f, k.x, b);
    }
    if constexpr (R == 8) acc = plain_step8(acc, s, k.w, b, offsetof(BlockQ6_K, d), k.x[0]);
    else acc = tile_step<KStep::plain>(acc, s, nullptr, ls);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

template <int R, int T>
struct Q4KTile {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q45k<false, R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct Q5KTile {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q45k<true, R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct Q6KTile {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q6k<R, T>(a, o, t, nr, nt); }
};

// One pass of T tokens from t (nt valid) over the 8-row block at o (nr8 valid rows):
// 8 / T rows per tile.
template <template <int, int> class Tile, int T>
inline void pass_rt(const MatmulArgs& a, int64_t o, int nr8, int64_t t, int nt) {
  constexpr int R = 8 / T;
  for (int r = 0; r < nr8; r += R) Tile<R, T>::run(a, o + r, t, std::min(R, nr8 - r), nt);
}

// Rows [o0, o1) x tokens [t_begin, n_tokens): per 8-row block, passes of 8 tokens (one
// row), then the rest as 4 + 2 + 1 (2 x 4, 4 x 2 and 8 x 1 rows), whichever of those
// it holds. A rest padded to the next tile cost that tile's tokens: 5 tokens were 8
// lanes of work, 3 were 4; one token as a decode tile costs less than 3 masked lanes
// (Zen 3, one thread, Q4_K 2048 x 1024, GMAC/s: 3 tokens 30.3 -> 37.2, 5 30.3 -> 43.5, 6
// 36.2 -> 45.1; 7 even). Every tile computes a (row, token) the same way, so the split changes no
// result.
template <template <int, int> class Tile>
void range_kquant_from(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t_begin) {
  for (int64_t c0 = t_begin; c0 < a.n_tokens; c0 += kTokenChunk) {
    const int64_t c1 = std::min(a.n_tokens, c0 + kTokenChunk);
    for (int64_t o = o0; o < o1; o += 8) {
      const int nr8 = static_cast<int>(std::min<int64_t>(8, o1 - o));
      int64_t t = c0;
      for (; c1 - t >= 8; t += 8) pass_rt<Tile, 8>(a, o, nr8, t, 8);
      if (c1 - t >= 4) {
        pass_rt<Tile, 4>(a, o, nr8, t, 4);
        t += 4;
      }
      if (c1 - t >= 2) {
        pass_rt<Tile, 2>(a, o, nr8, t, 2);
        t += 2;
      }
      if (c1 - t == 1) pass_rt<Tile, 1>(a, o, nr8, t, 1);
    }
  }
}

template <template <int, int> class Tile>
void range_kquant(const MatmulArgs& a, int64_t o0, int64_t o1) {
  range_kquant_from<Tile>(a, o0, o1, 0);
}

// acc + the sums of 4 adjacent u8 x s8 products per 32-bit lane (one VNNI instruction
// where available; maddubs cannot saturate here: levels <= 63, |x| <= 127).
inline __m256i dot_quads_acc(__m256i acc, __m256i u8, __m256i s8) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u8, s8);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u8, s8);
#else
  return chain_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)));
#endif
}

// A Q4_K block's 256 levels as bytes in element order, its scales and mins.
inline void unpack_q4k(const BlockQ4_K& blk, uint8_t* lv, uint8_t* sc, uint8_t* mn) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {
    const __m256i qb = load256u(blk.qs + 32 * c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 64 * c), _mm256_and_si256(qb, low4));
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(qb, 4), low4));
  }
  uint64_t sc8, mn8;
  q4k_scales_mins(blk.scales, &sc8, &mn8);
  std::memcpy(sc, &sc8, 8);
  std::memcpy(mn, &mn8, 8);
}

// A Q5_K block's 256 levels (0..31) as bytes in element order, its scales and mins.
inline void unpack_q5k(const BlockQ5_K& blk, uint8_t* lv, uint8_t* sc, uint8_t* mn) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i qh = load256u(blk.qh);
  for (int c = 0; c < 4; ++c) {
    const __m256i qb = load256u(blk.qs + 32 * c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 64 * c),
                       _mm256_or_si256(_mm256_and_si256(qb, low4), q5k_high(qh, 2 * c)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 64 * c + 32),
                       _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4), q5k_high(qh, 2 * c + 1)));
  }
  uint64_t sc8, mn8;
  q4k_scales_mins(blk.scales, &sc8, &mn8);
  std::memcpy(sc, &sc8, 8);
  std::memcpy(mn, &mn8, 8);
}

// A Q6_K block's 256 levels (0..63) as bytes in element order.
inline void unpack_q6k(const BlockQ6_K& blk, uint8_t* lv) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load256u(blk.ql + 64 * h), ql1 = load256u(blk.ql + 64 * h + 32);
    const __m256i qh = load256u(blk.qh + 32 * h);
    const __m256i q0 = _mm256_or_si256(_mm256_and_si256(ql0, low4), q6k_high(qh, 0));
    const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql1, low4), q6k_high(qh, 1));
    const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), q6k_high(qh, 2));
    const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), q6k_high(qh, 3));
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 128 * h), q0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 128 * h + 32), q1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 128 * h + 64), q2);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 128 * h + 96), q3);
  }
}

inline int32_t int16_pair(int lo, int hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

// Batches on 256-bit vectors: R rows x H halves (8 tokens each) of ActQ8Kx16 groups, the
// tokens in lanes, as the AVX-512 kernels do with 16 (matmul_kquant_avx512.cpp): each
// quad of levels is broadcast and multiplied with H halves' quads (vpdpbusd, or
// vpmaddubsw + vpmaddwd), the groups' sums (kGroup elements) scaled once by vpmulld.
// Q6_K has 16-element groups, signed scales and its -32 through bs16; Q4_K and Q5_K
// 32-element groups and mins.
enum class KQuant { q4, q5, q6 };
// One super-block's float step of a batched K-quant tile for 8 tokens (lanes lane..lane+7
// of x): the row's integer sum S, its mins' term (Q4_K, Q5_K) and the type's step.
template <KQuant kKind>
inline __m256 kquant_block_step(__m256 acc, __m256i S, const uint8_t* mn, float dw, float dm, const ActQ8Kx16& x,
                                int lane) {
  const __m256 dx = _mm256_loadu_ps(x.d + lane);
  const __m256 dwx = _mm256_mul_ps(_mm256_set1_ps(dw), dx);
  if constexpr (kKind == KQuant::q6) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), dwx, acc);
  } else {
    __m256i m = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p)
      m = dot_pairs_acc(m, _mm256_set1_epi32(int16_pair(mn[2 * p], mn[2 * p + 1])),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bs[p] + lane)));
    const __m256 dmx = _mm256_mul_ps(_mm256_set1_ps(dm), dx);
    if constexpr (kKind == KQuant::q5) return q5k_step(acc, S, m, dwx, dmx);
    return q4k_step(acc, S, m, dwx, dmx);
  }
}

template <KQuant kKind, int R, int H>
void tile_kquant_halves(const MatmulArgs& a, int64_t o, int64_t h0) {
  constexpr bool kQ6 = kKind == KQuant::q6;
  using Block = std::conditional_t<kQ6, BlockQ6_K, std::conditional_t<kKind == KQuant::q5, BlockQ5_K, BlockQ4_K>>;
  constexpr int kGroup = kQ6 ? 16 : 32;
  const int64_t nb = a.in / kQKK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ8Kx16* xg[H];
  int lane[H];
  for (int h = 0; h < H; ++h) {
    xg[h] = a.xk16 + ((h0 + h) / 2) * nb;
    lane[h] = static_cast<int>((h0 + h) % 2) * 8;
  }
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes / 4, R * a.w_row_stride);
  alignas(64) uint8_t lv[R][kQKK];
  __m256 acc[R][H];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    alignas(8) uint8_t sc[R][8], mn[R][8];
    float dw[R], dm[R];
    for (int r = 0; r < R; ++r) {
      const Block& blk = w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      if constexpr (kQ6) {
        unpack_q6k(blk, lv[r]);
        dm[r] = 0.0f;
      } else {
        if constexpr (kKind == KQuant::q5) {
          unpack_q5k(blk, lv[r], sc[r], mn[r]);
        } else {
          unpack_q4k(blk, lv[r], sc[r], mn[r]);
        }
        dm[r] = h2f(blk.dmin);
      }
      dw[r] = h2f(blk.d);
    }
    asm("" : "+m"(lv));  // quads broadcast from memory (a load), not extracted
    __m256i S[R][H];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) {
        S[r][h] = _mm256_setzero_si256();
        if constexpr (kQ6) {  // - 32 * sum_g sc[g] * bsums[g]
          __m256i off = _mm256_setzero_si256();
          for (int p = 0; p < 8; ++p)
            off = dot_pairs_acc(off, _mm256_set1_epi32(int16_pair(w[r][b].scales[2 * p], w[r][b].scales[2 * p + 1])),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg[h][b].bs16[p] + lane[h])));
          S[r][h] = _mm256_sub_epi32(S[r][h], _mm256_slli_epi32(off, 5));
        }
      }
    for (int k = 0; k < kQKK / kGroup; ++k) {
      __m256i sub[R][H];
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h) sub[r][h] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < kGroup / 4; ++i) {
        __m256i xv[H];
        for (int h = 0; h < H; ++h)
          xv[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg[h][b].q[kGroup / 4 * k + i] + lane[h]));
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, lv[r] + kGroup * k + 4 * i, 4);
          const __m256i wq = _mm256_set1_epi32(quad);
          for (int h = 0; h < H; ++h) sub[r][h] = dot_quads_acc(sub[r][h], wq, xv[h]);
        }
      }
      for (int r = 0; r < R; ++r) {
        const __m256i scv = _mm256_set1_epi32(kQ6 ? static_cast<int>(w[r][b].scales[k]) : static_cast<int>(sc[r][k]));
        for (int h = 0; h < H; ++h) S[r][h] = _mm256_add_epi32(S[r][h], _mm256_mullo_epi32(sub[r][h], scv));
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) {
        acc[r][h] = kquant_block_step<kKind>(acc[r][h], S[r][h], mn[r], dw[r], dm[r], xg[h][b], lane[h]);
      }
  }
  for (int h = 0; h < H; ++h) {
    const int64_t t0 = (h0 + h) * 8;
    for (int r = 0; r < R; ++r) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[r][h]);
      for (int l = 0; l < 8; ++l) a.y[(t0 + l) * a.out + o + r] = lanes[l];
    }
  }
}

#if !defined(__AVXVNNI__) && !(defined(__AVX512VNNI__) && defined(__AVX512VL__))
// Plain AVX2's batches: R rows x G groups of 16 tokens (2G halves). Without vpdpbusd,
// each quad costs vpmaddubsw + vpmaddwd, so here vpmaddubsw's pair sums are added in
// int16 over a run of quads while they cannot wrap (|x| <= 127: Q4_K 8 x 2 x 15 x 127 =
// 30480, Q5_K 4 x 2 x 31 x 127, Q6_K 2 x 2 x 63 x 127), and one vpmaddwd by the group's
// scale ends the run: 9 multiplies per 8 quads instead of 16 and a vpmulld, the same
// integers. With 4 rows, or 2 rows x 2 groups, only the run's sums and the operands
// stay in registers (8 + 3 or 8 + 4 + 1) and the super-block sums live in memory; 2 rows
// of one group keep those too. Scales and float accumulators live in the tile's memory.
template <KQuant kKind, int R, int G = 1>
void tile_kquant_group_i16(const MatmulArgs& a, int64_t o, int nr, int64_t g) {
  constexpr bool kQ6 = kKind == KQuant::q6;
  using Block = std::conditional_t<kQ6, BlockQ6_K, std::conditional_t<kKind == KQuant::q5, BlockQ5_K, BlockQ4_K>>;
  constexpr int kGroup = kQ6 ? 16 : 32;
  constexpr int kRun = kKind == KQuant::q4 ? 8 : kKind == KQuant::q5 ? 4 : 2;
  constexpr int H = 2 * G;
  const int64_t nb = a.in / kQKK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ8Kx16* xgs[G];
  for (int q = 0; q < G; ++q) xgs[q] = a.xk16 + (g + q) * nb;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes / 4, R * a.w_row_stride);
  // Two buffers: block b + 1 is unpacked while block b is multiplied, so the quads'
  // loads do not wait on the fresh 32-byte stores that wrote them (measured a few
  // percent, within the noise of the machine it was measured on).
  alignas(64) uint8_t lvb[2][R][kQKK];
  alignas(8) uint8_t scb[2][R][8], mnb[2][R][8];
  float dwb[2][R], dmb[2][R];
  const auto unpack = [&](int64_t b, int buf) {
    for (int r = 0; r < R; ++r) {
      const Block& blk = w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      if constexpr (kQ6) {
        unpack_q6k(blk, lvb[buf][r]);
        dmb[buf][r] = 0.0f;
      } else {
        if constexpr (kKind == KQuant::q5) {
          unpack_q5k(blk, lvb[buf][r], scb[buf][r], mnb[buf][r]);
        } else {
          unpack_q4k(blk, lvb[buf][r], scb[buf][r], mnb[buf][r]);
        }
        dmb[buf][r] = h2f(blk.dmin);
      }
      dwb[buf][r] = h2f(blk.d);
    }
  };
  alignas(32) __m256 acc[R][H];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
  unpack(0, 0);
  for (int64_t b = 0; b < nb; ++b) {
    const int buf = static_cast<int>(b & 1);
    if (b + 1 < nb) unpack(b + 1, buf ^ 1);
    auto& lv = lvb[buf];
    auto& sc = scb[buf];
    auto& mn = mnb[buf];
    const float* dw = dwb[buf];
    const float* dm = dmb[buf];
    alignas(32) __m256i S[R][H];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) {
        S[r][h] = _mm256_setzero_si256();
        if constexpr (kQ6) {  // - 32 * sum_g sc[g] * bsums[g]
          __m256i off = _mm256_setzero_si256();
          for (int p = 0; p < 8; ++p)
            off = dot_pairs_acc(off, _mm256_set1_epi32(int16_pair(w[r][b].scales[2 * p], w[r][b].scales[2 * p + 1])),
                                _mm256_load_si256(reinterpret_cast<const __m256i*>(xgs[h / 2][b].bs16[p] + 8 * (h % 2))));
          S[r][h] = _mm256_sub_epi32(S[r][h], _mm256_slli_epi32(off, 5));
        }
      }
    // Opaque from here on: quads broadcast from memory, sums and scales as memory operands.
    asm("" : "+m"(lvb));
    // More than 2 rows' or 2 halves' sums: they live in memory, one copy reached through
    // an opaque pointer (through `asm("" : "+m"(S))` GCC kept two copies of 2 x 4 sums and
    // loaded and stored both every run).
    __m256i* Sp = &S[0][0];
    if constexpr (R * H > 4) asm("" : "+r"(Sp) : : "memory");
    for (int k = 0; k < kQKK / kGroup; ++k) {
      alignas(32) __m256i scv[R];
      for (int r = 0; r < R; ++r)
        scv[r] = _mm256_set1_epi16(kQ6 ? static_cast<int16_t>(w[r][b].scales[k]) : static_cast<int16_t>(sc[r][k]));
      asm("" : "+m"(scv));
      for (int i0 = 0; i0 < kGroup / 4; i0 += kRun) {
        __m256i p16[R][H];
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < H; ++h) p16[r][h] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int i = i0; i < i0 + kRun; ++i) {
          __m256i xv[H];
          for (int h = 0; h < H; ++h)
            xv[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xgs[h / 2][b].q[kGroup / 4 * k + i] + 8 * (h % 2)));
          // 4 halves: the activations stay in registers for both rows (without this GCC
          // folds them into the multiplies and loads each twice).
          if constexpr (H > 2)
            for (int h = 0; h < H; ++h) asm("" : "+x"(xv[h]));
          for (int r = 0; r < R; ++r) {
            int32_t quad;
            std::memcpy(&quad, lv[r] + kGroup * k + 4 * i, 4);
            const __m256i wq = _mm256_set1_epi32(quad);
            for (int h = 0; h < H; ++h) p16[r][h] = chain_add_epi16(p16[r][h], _mm256_maddubs_epi16(wq, xv[h]));
          }
        }
        if constexpr (R * H > 4) {
          for (int r = 0; r < R; ++r)
            for (int h = 0; h < H; ++h) {
              __m256i* sp = Sp + r * H + h;
              _mm256_store_si256(sp, _mm256_add_epi32(_mm256_load_si256(sp), _mm256_madd_epi16(p16[r][h], scv[r])));
            }
        } else {
          for (int r = 0; r < R; ++r)
            for (int h = 0; h < H; ++h) S[r][h] = _mm256_add_epi32(S[r][h], _mm256_madd_epi16(p16[r][h], scv[r]));
        }
      }
    }
    if constexpr (R * H > 4) asm("" ::: "memory");
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) {
        acc[r][h] = kquant_block_step<kKind>(acc[r][h], S[r][h], mn[r], dw[r], dm[r], xgs[h / 2][b], 8 * (h % 2));
      }
    asm("" : "+m"(acc));
  }
  // Written out here, not through a shared helper: one taking acc by pointer measured
  // 2% slower (Q4_0, Q4_K 2048x2048 x 64 tokens), one taking the array drew -Warray-bounds.
  for (int q = 0; q < G; ++q) {
    const int64_t t0 = (g + q) * 16;
    const int n = static_cast<int>(std::min<int64_t>(16, a.n_tokens - t0));
    for (int r = 0; r < nr; ++r) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, acc[r][2 * q]);
      _mm256_store_ps(lanes + 8, acc[r][2 * q + 1]);
      for (int l = 0; l < n; ++l) a.y[(t0 + l) * a.out + o + r] = lanes[l];
    }
  }
}

// Plain AVX2: pairs of groups (32 tokens) in 2-row tiles for Q4_K and Q5_K, single
// groups in 2-row tiles for Q6_K; a last odd group of Q4_K/Q5_K in 4-row (Q4_K) or
// 2-row tiles; then the tokens after the groups in the R x T tiles. 32 tokens load 4
// activation vectors for each 2 broadcast quads instead of 2 (troupe_bench_issue_mix:
// 2.5 cycles per 4 multiplies instead of 3.1 on Zen 3). Measured on Zen 3, one thread,
// 2048x2048 x 64 tokens, alternated runs against 16-token tiles: Q5_K 73-75 -> 82-84
// GMAC/s, Q4_K 83-84 -> 90-91; Q6_K (runs of 2 quads) measured 0.85x and keeps 16.
template <KQuant kKind, template <int, int> class Tile>
void range_kquant_groups(const MatmulArgs& a, int64_t o0, int64_t o1) {
  constexpr int G = kKind == KQuant::q6 ? 1 : 2;
  constexpr int R = 2;
  constexpr int R1 = kKind == KQuant::q4 ? 4 : 2;  // rows of a single group's tiles
  for_group_tiles<G, R, R1>(
      a.n_groups_k, o0, o1, [&](int64_t o, int nr, int64_t g) { tile_kquant_group_i16<kKind, R, G>(a, o, nr, g); },
      [&](int64_t o, int nr, int64_t g) { tile_kquant_group_i16<kKind, R1>(a, o, nr, g); });
  range_kquant_from<Tile>(a, o0, o1, a.n_groups_k * 16);
}
#else
// Whole groups of 16 tokens (a group's two halves per pass over the rows; 2-row tiles,
// 16 registers), then the tokens after them in the R x T tiles.
template <KQuant kKind, template <int, int> class Tile>
void range_kquant_groups(const MatmulArgs& a, int64_t o0, int64_t o1) {
  for (int64_t g = 0; g < a.n_groups_k; ++g) {
    int64_t o = o0;
    for (; o + 2 <= o1; o += 2) tile_kquant_halves<kKind, 2, 2>(a, o, 2 * g);
    for (; o < o1; ++o) tile_kquant_halves<kKind, 1, 2>(a, o, 2 * g);
  }
  range_kquant_from<Tile>(a, o0, o1, a.n_groups_k * 16);
}
#endif

/// The Q4_K, Q5_K or Q6_K kernel, else nullptr.
inline MatmulRangeFn kquant_kernel(DType type) {
  switch (type) {
    case DType::q4_k: return range_kquant_groups<KQuant::q4, Q4KTile>;
    case DType::q5_k: return range_kquant_groups<KQuant::q5, Q5KTile>;
    case DType::q6_k: return range_kquant_groups<KQuant::q6, Q6KTile>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
