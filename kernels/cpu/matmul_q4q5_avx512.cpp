// Q4_0 and Q5_0 against 8-bit activations on 512-bit vectors (this file alone is built
// with -mavx512f -mavx512bw -mavx512vl -mavx512vnni besides AVX2): batches as R rows x
// G groups of 16 tokens in lanes, one vpdpbusd per weight dword and group; decode and
// small batches from matmul_q4q5_avx2.hpp (256-bit vpdpbusd). The integer block sums
// and the float steps are those of every ISA, so results are bit-identical
// (matmul_impl.hpp).
#include <immintrin.h>

#include "kernels/cpu/matmul_q4q5_avx2.hpp"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's 512-bit intrinsics (bug 105593)

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "matmul_q4q5_avx512.cpp is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

namespace troupe::kernels::cpu {
namespace {

// R rows (rows from nr on repeat row 0, never stored) x G groups of 16 tokens.
template <class W, int R, int G>
inline void tile_b8_512(const MatmulArgs& a, int64_t o, int nr, int64_t g0) {
  using Block = typename W::Block;
  const int64_t nb = a.in / kQK;
  const Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + (o + (r < nr ? r : 0)) * a.w_row_stride);
  const ActQ8x16* xg[G];
  for (int g = 0; g < G; ++g) xg[g] = a.xg8 + (g0 + g) * nb;
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    alignas(32) int32_t levels[R][kQK / 4];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + kPrefetchBytes, _MM_HINT_T0);
      _mm256_store_si256(reinterpret_cast<__m256i*>(levels[r]), W::u(w[r][b]));
    }
    // Opaque from here on, so each dword is broadcast from memory (a load, no shuffle).
    asm("" : "+m"(levels));
    __m512i s[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) s[r][g] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < kQK / 4; ++i) {
      __m512i xv[G];
      for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(xg[g][b].q[i]);
      for (int r = 0; r < R; ++r) {
        const __m512i wb = _mm512_set1_epi32(levels[r][i]);
        for (int g = 0; g < G; ++g) s[r][g] = _mm512_dpbusd_epi32(s[r][g], wb, xv[g]);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512i off = _mm512_slli_epi32(_mm512_load_si512(xg[g][b].sum), W::kOffsetShift);
      const __m512 xd = _mm512_load_ps(xg[g][b].d);
      for (int r = 0; r < R; ++r) {
        const __m512 dwx = _mm512_mul_ps(_mm512_set1_ps(h2f(w[r][b].d)), xd);
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s[r][g], off)), dwx, acc[r][g]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t tg = (g0 + g) * 16;
    const int n = static_cast<int>(std::min<int64_t>(16, a.n_tokens - tg));
    for (int r = 0; r < nr; ++r) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][g]);
      for (int l = 0; l < n; ++l) a.y[(tg + l) * a.out + o + r] = lanes[l];
    }
  }
}

constexpr int kRows = 4;    // rows per tile
constexpr int kGroups = 2;  // 32 tokens per pass: 8 independent vpdpbusd chains

template <class W, int G>
inline void rows_groups_b8_512(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t g) {
  for (int64_t o = o0; o < o1; o += kRows)
    tile_b8_512<W, kRows, G>(a, o, static_cast<int>(std::min<int64_t>(kRows, o1 - o)), g);
}

template <class W>
void range_b8_512(const MatmulArgs& a, int64_t o0, int64_t o1) {
  int64_t g = 0;
  for (; g + kGroups <= a.n_groups8; g += kGroups) rows_groups_b8_512<W, kGroups>(a, o0, o1, g);
  for (; g < a.n_groups8; ++g) rows_groups_b8_512<W, 1>(a, o0, o1, g);
  const int64_t first = std::min(a.n_tokens, a.n_groups8 * 16);
  if (first < a.n_tokens) rows_tokens_b8<W>(a, o0, o1, first, a.n_tokens);
}

}  // namespace

MatmulRangeFn matmul_kernel_q4q5_avx512(DType type) {
  switch (type) {
    case DType::q4_0: return range_b8_512<Q4_0U>;
    case DType::q5_0: return range_b8_512<Q5_0U>;
    default: return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
