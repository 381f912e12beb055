// Q4_0, Q5_0 and IQ4_NL against 8-bit activations on 512-bit vectors (this file alone is built
// with -mavx512f -mavx512bw -mavx512vl -mavx512vnni besides AVX2): batches as R rows x
// G groups of 16 tokens in lanes, one vpdpbusd per weight dword and group; decode and
// small batches of 2.. tokens with 16 rows in lanes (rows16_tokens_b8); decode from
// matmul_q4q5_avx2.hpp (256-bit vpdpbusd). The integer block sums
// and the float steps are those of every ISA, so results are bit-identical
// (matmul_impl.hpp).
#include <immintrin.h>

#include <type_traits>

#include "kernels/cpu/group_out_avx512.hpp"
#include "kernels/cpu/matmul_q4q5_avx2.hpp"
#include "kernels/cpu/transpose16_avx512.hpp"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's 512-bit intrinsics (bug 105593)

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "matmul_q4q5_avx512.cpp is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

namespace troupe::kernels::cpu {
namespace {

// Blocks per pass of a chunk's tiles (rows_groups_b8_512): about 16, whose activations (2
// groups: 20 KiB) stay in L1 with the chunk's weights and results; one pass where all the
// blocks' activations fit (up to 24 blocks), since a short pass costs more than it saves.
// Measured (Q4_0, 32 tokens): 16 ahead of 8 and 24 and level with 32 on the Llama-3.2-1B
// shapes, ~1.3x one pass over all the blocks on 8192x2048; one pass ~1.5x a pass of 16
// and one of 2 blocks on 576x1536.
constexpr int64_t kBlocksPerPass = 16;
constexpr int64_t kMaxBlocksOnePass = 24;

inline int64_t blocks_per_pass(int64_t nb) {
  if (nb <= kMaxBlocksOnePass) return nb;
  const int64_t passes = (nb + kBlocksPerPass - 1) / kBlocksPerPass;
  return (nb + passes - 1) / passes;
}

// R rows (rows from nr on repeat row 0, never stored) x G groups of 16 tokens over blocks
// [b0, b1): the accumulators start at zero (b0 = 0) or where the previous blocks left
// them in out, and go back there.
template <class W, int R, int G>
inline void tile_b8_512(const MatmulArgs& a, int64_t o, int nr, int64_t g0, int64_t b0, int64_t b1,
                        GroupRowsOut<G>& out) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* w[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ8x16* xg[G];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) xg[g] = a.xg8 + (g0 + g) * nb;
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[r][g] = b0 == 0 ? _mm512_setzero_ps() : out.get(o + r, g);
  // Prefetch what this tile's rows need one pass later: their next blocks, or after the
  // last pass the first blocks of the rows kChunk on (the next chunk's tile).
  const int64_t ahead = b1 < nb ? (b1 - b0) * static_cast<int64_t>(sizeof(Block))
                                : GroupRowsOut<G>::kChunk * a.w_row_stride - b0 * static_cast<int64_t>(sizeof(Block));
  for (int64_t b = b0; b < b1; ++b) {
    alignas(32) int32_t levels[R][kQK / 4];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + ahead, _MM_HINT_T0);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r]), W::u(w[r][b]));
    }
    // Opaque from here on, so each dword is broadcast from memory (a load, no shuffle).
    asm("" : "+m"(levels));
    // Each block sum starts at minus the levels' offset times the activations' sum, so
    // it ends up exactly S with no subtraction per row.
    __m512i s[R][G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const __m512i off = _mm512_slli_epi32(_mm512_load_si512(xg[g][b].sum), W::kOffsetShift);
      const __m512i neg = _mm512_sub_epi32(_mm512_setzero_si512(), off);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) s[r][g] = neg;
    }
#pragma GCC unroll 8
    for (int i = 0; i < kQK / 4; ++i) {
      __m512i xv[G];
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(xg[g][b].q[i]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i wb = _mm512_set1_epi32(levels[r][i]);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) s[r][g] = _mm512_dpbusd_epi32(s[r][g], wb, xv[g]);
      }
    }
    __m512 xd[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) xd[g] = _mm512_load_ps(xg[g][b].d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_set1_ps(block_scale<W>(w[r][b]));
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g)
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][g]), _mm512_mul_ps(dw, xd[g]), acc[r][g]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) out.put(o + r, g, acc[r][g]);
}

// Tiles measured with troupe_bench_kernels (Q4_0, Llama-3.2-1B shapes, 32 tokens, 1 thread):
// 6 rows x 2 groups (24 of the 32 zmm registers hold block sums and accumulators) ahead
// of 4 x 2, which spends more loads (broadcasts and activations) per vpdpbusd.
constexpr int kRows = 6;        // rows per tile
constexpr int kGroups = 2;      // 32 tokens per pass: 12 independent vpdpbusd chains
constexpr int kRowsSmall = 4;   // the last rows of a range, when no more than this many

// Rows [o0, o1) x G groups, kChunk rows at a time; each chunk's tiles take
// blocks_per_pass blocks per pass, so those blocks' activations (G x 640 bytes each)
// are read from L1 by all the chunk's tiles instead of coming from L2 for every tile.
template <class W, int G>
inline void rows_groups_b8_512(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t g) {
  const int64_t nb = a.in / kQK, per_pass = blocks_per_pass(nb);
  GroupRowsOut<G> out(a, g, o0);
  for (int64_t oc = o0; oc < o1; oc += GroupRowsOut<G>::kChunk) {
    const int64_t oe = std::min<int64_t>(o1, oc + GroupRowsOut<G>::kChunk);
    for (int64_t b0 = 0; b0 < nb; b0 += per_pass) {
      const int64_t b1 = std::min<int64_t>(nb, b0 + per_pass);
      int64_t o = oc;
      for (; o + kRows <= oe; o += kRows) tile_b8_512<W, kRows, G>(a, o, kRows, g, b0, b1, out);
      if (oe - o > kRowsSmall) {
        tile_b8_512<W, kRows, G>(a, o, static_cast<int>(oe - o), g, b0, b1, out);
      } else if (o < oe) {
        tile_b8_512<W, kRowsSmall, G>(a, o, static_cast<int>(oe - o), g, b0, b1, out);
      }
    }
    out.flush(oe);
  }
}

// Small batches: 16 rows in lanes x T tokens. Two blocks of 16 rows' levels (16 x 16
// dwords) are transposed at once, so vector i holds dword i of every row; a token then
// costs 8 vpdpbusd per block with its dwords broadcast, and no horizontal sums (a
// reduce8 per 8 rows and token costs more than the products).
template <class W, int T>
inline void rows16_tokens_b8(const MatmulArgs& a, int64_t o, int64_t t0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* w[16];
  for (int r = 0; r < 16; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ8* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ8*>(a.xq + (t0 + t) * a.xq_row_bytes);
  // At least a whole tile ahead: the same blocks of the next tile's rows.
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 16 * a.w_row_stride);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const int nh = b + 1 < nb ? 2 : 1;
    __m512i wt[16];
    {
      __m512i rows[16];
      for (int r = 0; r < 16; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + ahead, _MM_HINT_T0);
        const __m256i hi = nh == 2 ? W::u(w[r][b + 1]) : _mm256_setzero_si256();
        rows[r] = _mm512_inserti64x4(_mm512_castsi256_si512(W::u(w[r][b])), hi, 1);
      }
      transpose16(rows, wt);
    }
    for (int h = 0; h < nh; ++h) {
      // The 16 f16 scales word by word into vectors (see rows8_tokens_b8); MXFP4's E8M0 bytes.
      __m128i dlo = _mm_setzero_si128(), dhi = _mm_setzero_si128();
      for (int r = 0; r < 8; ++r) {
        if constexpr (kE8M0<W>) {
          dlo = _mm_insert_epi8(dlo, w[r][b + h].e, r);
          dhi = _mm_insert_epi8(dhi, w[r + 8][b + h].e, r);
        } else {
          dlo = _mm_insert_epi16(dlo, w[r][b + h].d, r);
          dhi = _mm_insert_epi16(dhi, w[r + 8][b + h].d, r);
        }
      }
      __m512 dw;
      if constexpr (kE8M0<W>) {
        const __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(e8m0_half8(dlo)));
        dw = _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(e8m0_half8(dhi)), 1));
      } else {
        dw = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(dlo), dhi, 1));
      }
      // Chains per token: one from 4 tokens on, else two (even and odd dwords).
      constexpr int C = T >= 4 ? 1 : 2;
      __m512i s[C][T];
      for (int c = 0; c < C; ++c)
        for (int t = 0; t < T; ++t) s[c][t] = _mm512_setzero_si512();
      for (int i = 0; i < kQK / 4; ++i) {
        for (int t = 0; t < T; ++t) {
          int32_t quad;
          std::memcpy(&quad, x[t][b + h].qs + 4 * i, 4);
          s[i % C][t] = _mm512_dpbusd_epi32(s[i % C][t], wt[8 * h + i], _mm512_set1_epi32(quad));
        }
      }
      for (int t = 0; t < T; ++t) {
        const ActQ8& xb = x[t][b + h];
        const __m512i sum = C == 2 ? _mm512_add_epi32(s[0][t], s[C - 1][t]) : s[0][t];
        const __m512i st = _mm512_sub_epi32(sum, _mm512_set1_epi32(xb.sum << W::kOffsetShift));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(st), _mm512_mul_ps(dw, _mm512_set1_ps(xb.d)), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (t0 + t) * a.out + o, acc[t]);
}

// Word indices of the scale transpose in rows16_token_q4_0 (vpermt2w: bit 5 picks the
// second source). Row r's 4-block load holds block k's scale in word 9k.
struct ScaleTransposeIndex {
  alignas(64) uint16_t a[32], b[32], c[32], d01[32], d23[32];
  constexpr ScaleTransposeIndex() : a(), b(), c(), d01(), d23() {
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 2; ++e) a[2 * k + e] = static_cast<uint16_t>(9 * k + 32 * e);  // rows 2j, 2j+1
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 4; ++e) b[4 * k + e] = static_cast<uint16_t>((e >> 1) * 32 + 2 * k + (e & 1));
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 8; ++e) c[8 * k + e] = static_cast<uint16_t>((e >> 2) * 32 + 4 * k + (e & 3));
    for (int k = 0; k < 2; ++k)
      for (int e = 0; e < 16; ++e) {
        d01[16 * k + e] = static_cast<uint16_t>((e >> 3) * 32 + 8 * k + (e & 7));
        d23[16 * k + e] = static_cast<uint16_t>((e >> 3) * 32 + 8 * (k + 2) + (e & 7));
      }
  }
};
constexpr ScaleTransposeIndex kScaleIdx{};

// The f16 scales of blocks b..b+nk-1 of 16 rows as 4 vectors of 16 rows (dw[k]): one load
// per row and 16 two-source word permutes (a gather per block cost more than the dot products).
inline void scales16x4(const uint8_t* w0, int stride, int64_t b, int nk, __m512 dw[4]) {
  const __mmask32 m = (__mmask32{1} << (9 * (nk - 1) + 1)) - 1;  // up to the last scale: never past the row
  const __m512i ia = _mm512_load_si512(kScaleIdx.a), ib = _mm512_load_si512(kScaleIdx.b);
  const __m512i ic = _mm512_load_si512(kScaleIdx.c);
  __m512i mj[8], ni[4], ph[2];
  for (int j = 0; j < 8; ++j) {
    const uint8_t* r0 = w0 + int64_t{2 * j} * stride + b * int64_t{sizeof(BlockQ4_0)};
    mj[j] = _mm512_permutex2var_epi16(_mm512_maskz_loadu_epi16(m, r0), ia, _mm512_maskz_loadu_epi16(m, r0 + stride));
  }
  for (int i = 0; i < 4; ++i) ni[i] = _mm512_permutex2var_epi16(mj[2 * i], ib, mj[2 * i + 1]);
  for (int h = 0; h < 2; ++h) ph[h] = _mm512_permutex2var_epi16(ni[2 * h], ic, ni[2 * h + 1]);
  const __m512i v01 = _mm512_permutex2var_epi16(ph[0], _mm512_load_si512(kScaleIdx.d01), ph[1]);
  const __m512i v23 = _mm512_permutex2var_epi16(ph[0], _mm512_load_si512(kScaleIdx.d23), ph[1]);
  dw[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(v01));
  dw[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v01, 1));
  dw[2] = _mm512_cvtph_ps(_mm512_castsi512_si256(v23));
  dw[3] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v23, 1));
}

// Decode of Q4_0 (one token), 16 rows in lanes. Per row, 4 blocks' nibbles share one
// vector (128-bit lane k = block b + k): the low nibbles meet elements 0..15 of those
// blocks and the high nibbles elements 16..31, so two vpdpbusd leave 4 partial sums per
// block and no unpacking into element order. A transpose-add network turns the 16 rows'
// vectors into one vector per block with the rows in lanes, and so do word permutes for the
// 16 rows' scales (scales16x4). Per (row, block) the exact S and the float step are those of every
// kernel, in block order. About a third of the instructions per weight byte of
// rows8_tokens_b8, whose cost (not the memory) bounded decode.
inline void rows16_token_q4_0(const MatmulArgs& a, int64_t o, int64_t t) {
  const int64_t nb = a.in / kQK;
  const uint8_t* w0 = a.w + o * a.w_row_stride;
  const auto* x = reinterpret_cast<const ActQ8*>(a.xq + t * a.xq_row_bytes);
  const int stride = static_cast<int>(a.w_row_stride);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // The same blocks of the next tile's rows: a tile's rows are read side by side, so the
  // next tile is the stream ahead of every row.
  const int64_t ahead = 16 * a.w_row_stride;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 4) {
    const int nk = static_cast<int>(std::min<int64_t>(4, nb - b));
    __m512i xlo = _mm512_setzero_si512(), xhi = _mm512_setzero_si512();
    for (int k = 0; k < nk; ++k) {
      xlo = _mm512_inserti32x4(xlo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b + k].qs)), k);
      xhi = _mm512_inserti32x4(xhi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b + k].qs + 16)), k);
    }
    __m512i p[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(w0 + int64_t{r} * stride) + b;
      const char* pf = reinterpret_cast<const char*>(blk) + ahead;
      _mm_prefetch(pf, _MM_HINT_T0);
      _mm_prefetch(pf + 4 * sizeof(BlockQ4_0) - 1, _MM_HINT_T0);  // 72 bytes may span 3 lines
      __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs)));
      if (nk == 4) {
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs)), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[2].qs)), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[3].qs)), 3);
      } else {
        for (int k = 1; k < nk; ++k)
          q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[k].qs)), k);
      }
      const __m512i lo = _mm512_and_si512(q, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      p[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
    }
    // Rows 2i, 2i+1 interleaved, then 4i..4i+3: lane k of q4[i] holds S of rows 4i..4i+3, block b + k.
    __m512i t8[8], q4[4];
    for (int i = 0; i < 8; ++i)
      t8[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]),
                               _mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
    for (int i = 0; i < 4; ++i)
      q4[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t8[2 * i], t8[2 * i + 1]),
                               _mm512_unpackhi_epi64(t8[2 * i], t8[2 * i + 1]));
    const __m512i u0 = _mm512_shuffle_i32x4(q4[0], q4[1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i u1 = _mm512_shuffle_i32x4(q4[0], q4[1], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i u2 = _mm512_shuffle_i32x4(q4[2], q4[3], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i u3 = _mm512_shuffle_i32x4(q4[2], q4[3], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i sk[4] = {_mm512_shuffle_i32x4(u0, u2, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_i32x4(u0, u2, _MM_SHUFFLE(3, 1, 3, 1)),
                           _mm512_shuffle_i32x4(u1, u3, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_i32x4(u1, u3, _MM_SHUFFLE(3, 1, 3, 1))};
    __m512 dw[4];
    scales16x4(w0, stride, b, nk, dw);
    for (int k = 0; k < nk; ++k) {
      const ActQ8& xb = x[b + k];
      const __m512i s = _mm512_sub_epi32(sk[k], _mm512_set1_epi32(xb.sum << Q4_0U::kOffsetShift));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[k], _mm512_set1_ps(xb.d)), acc);
    }
  }
  _mm512_storeu_ps(a.y + t * a.out + o, acc);
}

// One token t over rows [o0, o1): Q4_0 in 16-row tiles, other rows and types 8 rows in lanes.
template <class W>
void rows_token_b8_512(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t) {
  int64_t o = o0;
  if constexpr (std::is_same_v<W, Q4_0U>) {
    if (a.w_row_stride < (int64_t{1} << 31) / 16)  // row offsets in int
      for (; o + 16 <= o1; o += 16) rows16_token_q4_0(a, o, t);
  }
  if (o < o1) rows_tokens_b8<W>(a, o, o1, t, t + 1);
}

constexpr int kTokensPerPass = 8;

// rows16_tokens_b8 for 1 <= n < kTokensPerPass tokens.
template <class W, int T = 1>
inline void rows16_tail_b8(const MatmulArgs& a, int64_t o, int64_t t, int n) {
  if constexpr (T < kTokensPerPass) {
    if (n == T) return rows16_tokens_b8<W, T>(a, o, t);
    rows16_tail_b8<W, T + 1>(a, o, t, n);
  }
}

// Tokens [t0, t1) (2 or more): 16-row tiles, then the rows after the last tile.
template <class W>
void rows_tokens16_b8(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
  int64_t o = o0;
  for (; o + 16 <= o1; o += 16) {
    int64_t t = t0;
    for (; t + kTokensPerPass <= t1; t += kTokensPerPass) rows16_tokens_b8<W, kTokensPerPass>(a, o, t);
    if (t < t1) rows16_tail_b8<W>(a, o, t, static_cast<int>(t1 - t));
  }
  if (o < o1) rows_tokens_b8<W>(a, o, o1, t0, t1);
}

template <class W>
void range_b8_512(const MatmulArgs& a, int64_t o0, int64_t o1) {
  int64_t g = 0;
  for (; g + kGroups <= a.n_groups8; g += kGroups) rows_groups_b8_512<W, kGroups>(a, o0, o1, g);
  for (; g < a.n_groups8; ++g) rows_groups_b8_512<W, 1>(a, o0, o1, g);
  const int64_t first = std::min(a.n_tokens, a.n_groups8 * 16);
  if (a.n_tokens - first == 1) {
    rows_token_b8_512<W>(a, o0, o1, first);  // decode
  } else if (first < a.n_tokens) {
    rows_tokens16_b8<W>(a, o0, o1, first, a.n_tokens);
  }
}

}  // namespace

MatmulRangeFn matmul_kernel_q4q5_avx512(DType type) {
  if (type == kMxfp4) return range_b8_512<MXFP4U>;  // no enumerator to switch on
  switch (type) {
    case DType::q4_0: return range_b8_512<Q4_0U>;
    case DType::q5_0: return range_b8_512<Q5_0U>;
    case DType::iq4_nl: return range_b8_512<IQ4_NLU>;
    default: return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
