// The 32-element block matmul kernels built with AVX-512 F/BW/VL/VNNI (this
// file alone gets those flags): batches run vpdpwssd on 512-bit vectors with
// 16 tokens in lanes (ActQ16x16 groups) over a tile of R rows x G groups, so
// one activation load feeds R multiply-adds and one weight broadcast feeds G.
// Up to 12 tokens (small batches, and the tokens after the last group) run
// with 16 rows in lanes instead (rows16_tokens); a single token (decode) runs
// the AVX2 kernels of matmul_q8_avx2.hpp. Every lane computes matmul_impl.hpp's
// per-(row, token) arithmetic exactly (exact integer block sums, then the same
// fma chain in block order), so the results are bit-identical to the AVX2
// kernels.
#include <immintrin.h>

#include "kernels/cpu/matmul_q8_avx2.hpp"
#include "kernels/cpu/transpose16_avx512.hpp"

// GCC 12 warns "'__Y' may be used uninitialized" inside its own 512-bit
// intrinsics (their _mm512_undefined_* operands; GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "matmul_avx512_vnni.cpp is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

namespace troupe::kernels::cpu {
namespace {

// A weight block's 32 levels as 16-bit integers in element order.
template <class W>
inline __m512i widen512(const typename W::Block& blk) {
  const __m256i q = W::q(blk);
  if constexpr (W::kSigned) {
    return _mm512_cvtepi8_epi16(q);
  } else {
    return _mm512_cvtepu8_epi16(q);
  }
}

// R rows x G groups of 16 tokens. Per block each row's levels are widened once
// into a small buffer; each pair of levels is broadcast straight from it (a
// load, no shuffle) and multiplied with G groups' pairs, each activation
// vector with R rows' pairs: the lanes end up holding whole block sums, so
// there are no horizontal sums and one float step per block for 16 tokens.
template <class W, int R, int G>
inline void tile16(const MatmulArgs& a, int64_t o, int64_t g0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ16x16* xg[G];
  for (int g = 0; g < G; ++g) xg[g] = a.xg16 + (g0 + g) * nb;
  alignas(64) int32_t levels[R][kQK / 2];
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + kPrefetchBytes, _MM_HINT_T0);
      _mm512_store_si512(levels[r], widen512<W>(w[r][b]));
    }
    // Opaque to the compiler from here on, so it broadcasts from memory (a load)
    // instead of extracting each pair from the register (a shuffle-port uop).
    asm("" : "+m"(levels));
    // Two block-sum chains per (row, group), even and odd pairs, so 2 R G
    // multiply-adds are independent (vpdpwssd: latency 4-5, two per cycle).
    __m512i s0[R][G], s1[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) s0[r][g] = s1[r][g] = _mm512_setzero_si512();
    const auto step = [&](int i, __m512i (&sums)[R][G]) {
      __m512i xv[G];
      for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(xg[g][b].q[i]);
      for (int r = 0; r < R; ++r) {
        // vpbroadcastd from memory: a load-port uop only.
        const __m512i wp = _mm512_set1_epi32(levels[r][i]);
        for (int g = 0; g < G; ++g) sums[r][g] = _mm512_dpwssd_epi32(sums[r][g], wp, xv[g]);
      }
    };
#pragma GCC unroll 8
    for (int i = 0; i < kQK / 2; i += 2) {
      step(i, s0);
      step(i + 1, s1);
    }
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) s0[r][g] = _mm512_add_epi32(s0[r][g], s1[r][g]);
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_set1_ps(W::d(w[r][b]));
      for (int g = 0; g < G; ++g)
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[r][g]), _mm512_mul_ps(dw, _mm512_load_ps(xg[g][b].d)),
                                    acc[r][g]);
      if constexpr (W::kMin) {
        const __m512 mw = _mm512_set1_ps(W::m(w[r][b]));
        for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(mw, _mm512_load_ps(xg[g][b].s), acc[r][g]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t t0 = (g0 + g) * 16;
    const int n = static_cast<int>(std::min<int64_t>(16, a.n_tokens - t0));
    for (int r = 0; r < R; ++r) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][g]);
      for (int l = 0; l < n; ++l) a.y[(t0 + l) * a.out + o + r] = lanes[l];
    }
  }
}

// Tiles measured with troupe_bench_kernels (Q8_0, 576x1536 and 1536x576, 32 and
// 128 tokens, 1 thread): 4x2 ahead of 6x2 and 8x2 by a few percent, of 4x3 and 8x1
// by 10-25%; two block-sum chains instead of one, +3-5%.
constexpr int kRows = 4;    // rows per tile
constexpr int kGroups = 2;  // 32 tokens per pass: 16 block-sum accumulators in registers

template <class W, int G>
inline void rows_groups16(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t g) {
  int64_t o = o0;
  for (; o + kRows <= o1; o += kRows) tile16<W, kRows, G>(a, o, g);
  for (; o + 2 <= o1; o += 2) tile16<W, 2, G>(a, o, g);
  for (; o < o1; ++o) tile16<W, 1, G>(a, o, g);
}

// Small batches: 16 rows x T tokens with the rows in lanes. Per block the 16
// rows' levels are widened and transposed once (pair i of every row in one
// vector); each token then needs only 16 multiply-adds with its pairs
// broadcast, and no horizontal sums. The transpose is paid once for T tokens,
// where a 16-token group pays 16 multiply-adds per row whatever the number of
// real tokens, so this wins for up to 12 tokens (kSmallBatch16).
template <class W, int T>
inline void rows16_tokens(const MatmulArgs& a, int64_t o, int64_t t0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* w[16];
  for (int r = 0; r < 16; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + r) * a.w_row_stride);
  const ActQ16* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ16*>(a.xq + (t0 + t) * a.xq_row_bytes);
  // At least a whole tile ahead: the same block of the next tile's row.
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 16 * a.w_row_stride);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i wt[16];
    {
      __m512i rows[16];
      for (int r = 0; r < 16; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + ahead, _MM_HINT_T0);
        rows[r] = widen512<W>(w[r][b]);
      }
      transpose16(rows, wt);
    }
    // Every block type starts with its f16 scale; type-1 blocks follow it with the f16 min.
    alignas(32) uint16_t dh[16], mh[16];
    for (int r = 0; r < 16; ++r) {
      std::memcpy(&dh[r], &w[r][b], 2);
      if constexpr (W::kMin) std::memcpy(&mh[r], reinterpret_cast<const uint8_t*>(&w[r][b]) + 2, 2);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dh)));
    // Block-sum chains: one per token from 4 tokens on (T independent multiply-adds),
    // else two (even and odd pairs) so that at least 2 T are in flight.
    constexpr int C = T >= 4 ? 1 : 2;
    __m512i s[C][T];
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < T; ++t) s[c][t] = _mm512_setzero_si512();
    for (int i = 0; i < kQK / 2; ++i) {
      for (int t = 0; t < T; ++t) {
        int32_t pair;
        std::memcpy(&pair, x[t][b].qs + 2 * i, 4);
        s[i % C][t] = _mm512_dpwssd_epi32(s[i % C][t], wt[i], _mm512_set1_epi32(pair));
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m512i sum = C == 2 ? _mm512_add_epi32(s[0][t], s[C - 1][t]) : s[0][t];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(x[t][b].d)), acc[t]);
    }
    if constexpr (W::kMin) {
      const __m512 mw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mh)));
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[t][b].s), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (t0 + t) * a.out + o, acc[t]);
}

// Tokens per pass of rows16_tokens. Measured with troupe_bench_kernels (Q4_1 and Q8_0,
// 576x1536 and 1536x576, 2 threads): 12 tokens in one pass beat 8 + 4 by 20-30%.
constexpr int kTokensPerPass = 12;

// rows16_tokens for 1 <= n < kTokensPerPass tokens.
template <class W, int T = 1>
inline void rows16_tail(const MatmulArgs& a, int64_t o, int64_t t, int n) {
  if constexpr (T < kTokensPerPass) {
    if (n == T) return rows16_tokens<W, T>(a, o, t);
    rows16_tail<W, T + 1>(a, o, t, n);
  }
}

// Tokens [t0, t1) one pass of up to kTokensPerPass at a time: 16-row tiles, then
// the rows after the last tile with the single-token kernels.
template <class W>
void rows_tokens16(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
  int64_t o = o0;
  for (; o + 16 <= o1; o += 16) {
    int64_t t = t0;
    for (; t + kTokensPerPass <= t1; t += kTokensPerPass) rows16_tokens<W, kTokensPerPass>(a, o, t);
    if (t < t1) rows16_tail<W>(a, o, t, static_cast<int>(t1 - t));
  }
  if (o < o1)
    for (int64_t t = t0; t < t1; ++t) rows_token<W>(a, o, o1, t);
}

template <class W>
void range_q8_512(const MatmulArgs& a, int64_t o0, int64_t o1) {
  // One pass of groups at a time over all the rows: its activations stay close
  // while the rows' weights come from L2.
  int64_t g = 0;
  for (; g + kGroups <= a.n_groups; g += kGroups) rows_groups16<W, kGroups>(a, o0, o1, g);
  for (; g < a.n_groups; ++g) rows_groups16<W, 1>(a, o0, o1, g);
  const int64_t first = std::min(a.n_tokens, a.n_groups * 16);
  if (a.n_tokens == 1) {
    rows_token<W>(a, o0, o1, 0);  // decode: rows16_tokens<W, 1> is a third slower
  } else if (first < a.n_tokens) {
    rows_tokens16<W>(a, o0, o1, first, a.n_tokens);
  }
}

}  // namespace

void act_group16_avx512(const ActQ16* rows, int64_t nb, int n, ActQ16x16* group) {
  for (int64_t b = 0; b < nb; ++b) {
    __m512i r[16], q[16];
    alignas(64) float d[16], sx[16];
    for (int t = 0; t < 16; ++t) {
      if (t < n) {
        const ActQ16& blk = rows[t * nb + b];
        r[t] = _mm512_loadu_si512(blk.qs);
        d[t] = blk.d;
        sx[t] = blk.s;
      } else {
        r[t] = _mm512_setzero_si512();
        d[t] = sx[t] = 0.0f;
      }
    }
    transpose16(r, q);
    for (int i = 0; i < kQK / 2; ++i) _mm512_store_si512(group[b].q[i], q[i]);
    _mm512_store_ps(group[b].d, _mm512_load_ps(d));
    _mm512_store_ps(group[b].s, _mm512_load_ps(sx));
  }
}

MatmulRangeFn matmul_kernel_avx512_vnni(DType type) {
  if (type == kMxfp4) return matmul_kernel_q4q5_avx512(type);  // no enumerator to switch on
  switch (type) {
    case DType::q4_0: case DType::q5_0: case DType::iq4_nl: return matmul_kernel_q4q5_avx512(type);
    case DType::q4_1: return range_q8_512<Q4_1W>;
    case DType::q5_1: return range_q8_512<Q5_1W>;
    case DType::q8_0: return range_q8_512<Q8_0W>;
    case DType::q4_k: case DType::q5_k: case DType::q6_k: case DType::q2_k: case DType::q3_k: case DType::iq4_xs:
      return matmul_kernel_kquant_avx512(type);
    default: return matmul_kernel_avx2(type);  // the other types gain nothing from it
  }
}

}  // namespace troupe::kernels::cpu
