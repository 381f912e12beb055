// AVX2 matmul kernels of the group-scaled K-quants Q2_K, Q3_K and IQ4_XS against
// ActQ8K activations (built with -mavx2 -mfma -mf16c; Q5_K is with Q4_K in
// matmul_kquant_avx2.hpp). Each computes matmul_impl.hpp's arithmetic exactly: the
// integer sums of a super-block are reduced to one int before the float steps, so
// the results are bit-identical to the portable kernels (matmul_scalar.cpp) on
// every ISA.
//
// A tile is one weight row x T tokens: a super-block's levels are unpacked once
// and used for T tokens.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/matmul_impl.hpp"

namespace troupe::kernels::cpu {
namespace {

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Two 16-bit scales, one per 128-bit lane (one group of 16 elements each).
inline __m256i lane_scales(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)), _mm_set1_epi16(static_cast<int16_t>(lo)));
}

// Unsigned levels (< 128) x activations, 32 at a time, times one 16-bit scale per lane/pair.
inline __m256i dot_scaled(__m256i levels, const int8_t* x, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(levels, load256(x)), scales);
}

inline const ActQ8K* act_row(const MatmulArgs& a, int64_t t) {
  return reinterpret_cast<const ActQ8K*>(a.xq + t * a.xq_row_bytes);
}

// The float steps shared with the portable kernel.
inline float step(float acc, int isum, int msum, float dw, float dmin, float dx, bool has_min) {
  acc = std::fma(static_cast<float>(isum), dw * dx, acc);
  if (has_min) acc = std::fma(-static_cast<float>(msum), dmin * dx, acc);
  return acc;
}

// Q2_K: levels 0..3 are bit pairs 2j of qs[32h + 0..31] = elements 128h + 32j + 0..31,
// groups 8h + 2j (first 16) and 8h + 2j + 1.
template <int T>
void tile_q2k(const MatmulArgs& a, int64_t o, int64_t t0) {
  const auto* w = reinterpret_cast<const BlockQ2_K*>(a.w + o * a.w_row_stride);
  const ActQ8K* xr[T];
  for (int t = 0; t < T; ++t) xr[t] = act_row(a, t0 + t);
  const __m256i low2 = _mm256_set1_epi8(3);
  float acc[T] = {};
  for (int64_t b = 0; b < a.in / kQKK; ++b) {
    const BlockQ2_K& blk = w[b];
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    const __m256i mins16 = _mm256_srli_epi16(sm, 4);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qb = load256(blk.qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i lv = _mm256_and_si256(_mm256_srli_epi16(qb, 2 * j), low2);
        const int g = 8 * h + 2 * j;
        const __m256i s = lane_scales(blk.scales[g] & 0x0f, blk.scales[g + 1] & 0x0f);
        for (int t = 0; t < T; ++t)
          isum[t] = _mm256_add_epi32(isum[t], dot_scaled(lv, xr[t][b].qs + 128 * h + 32 * j, s));
      }
    }
    const float dw = _cvtsh_ss(blk.d), dmin = _cvtsh_ss(blk.dmin);
    for (int t = 0; t < T; ++t) {
      const int msum = hsum_i32(_mm256_madd_epi16(load256(xr[t][b].bsums), mins16));
      acc[t] = step(acc[t], hsum_i32(isum[t]), msum, dw, dmin, xr[t][b].d, true);
    }
  }
  for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.out + o] = acc[t];
}

// Q3_K: Q2_K's bit pairs plus the high bit (bit 4h + j of hmask[0..31]) as levels
// u = q + 4 in 0..7; the -4 comes back exactly through the bsums.
template <int T>
void tile_q3k(const MatmulArgs& a, int64_t o, int64_t t0) {
  const auto* w = reinterpret_cast<const BlockQ3_K*>(a.w + o * a.w_row_stride);
  const ActQ8K* xr[T];
  for (int t = 0; t < T; ++t) xr[t] = act_row(a, t0 + t);
  const __m256i low2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  float acc[T] = {};
  for (int64_t b = 0; b < a.in / kQKK; ++b) {
    const BlockQ3_K& blk = w[b];
    alignas(32) int16_t sc[16];
    for (int g = 0; g < 16; ++g) sc[g] = static_cast<int16_t>(q3k_scale(g, blk.scales) - 32);
    const __m256i sc16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc));
    __m256i isum[T];
    for (int t = 0; t < T; ++t)  // - 4 * sum_g sc[g] * bsums[g]
      isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_slli_epi32(_mm256_madd_epi16(load256(xr[t][b].bsums), sc16), 2));
    const __m256i hm = load256(blk.hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i qb = load256(blk.qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one);
        const __m256i lv = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 2 * j), low2),
                                           _mm256_slli_epi16(hi, 2));
        const int g = 8 * h + 2 * j;
        const __m256i s = lane_scales(sc[g], sc[g + 1]);
        for (int t = 0; t < T; ++t)
          isum[t] = _mm256_add_epi32(isum[t], dot_scaled(lv, xr[t][b].qs + 128 * h + 32 * j, s));
      }
    }
    const float dw = _cvtsh_ss(blk.d);
    for (int t = 0; t < T; ++t) acc[t] = step(acc[t], hsum_i32(isum[t]), 0, dw, 0.0f, xr[t][b].d, false);
  }
  for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.out + o] = acc[t];
}

// IQ4_XS: per sub-block the 32 nibbles look up signed grid levels (pshufb); maddubs
// takes |level| and the activation with the level's sign (|x| <= 127, so no overflow).
template <int T>
void tile_iq4xs(const MatmulArgs& a, int64_t o, int64_t t0) {
  const auto* w = reinterpret_cast<const BlockIQ4_XS*>(a.w + o * a.w_row_stride);
  const ActQ8K* xr[T];
  for (int t = 0; t < T; ++t) xr[t] = act_row(a, t0 + t);
  const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i nibble_shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  float acc[T] = {};
  for (int64_t b = 0; b < a.in / kQKK; ++b) {
    const BlockIQ4_XS& blk = w[b];
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      // Low nibbles (elements 0..15) in the low lane, high nibbles (16..31) in the high lane.
      const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * j)));
      const __m256i lv = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srlv_epi32(raw, nibble_shift), low4));
      const __m256i mag = _mm256_sign_epi8(lv, lv);
      const __m256i s = _mm256_set1_epi16(static_cast<int16_t>(iq4xs_scale(j, blk) - 32));
      for (int t = 0; t < T; ++t) {
        const __m256i x = _mm256_sign_epi8(load256(xr[t][b].qs + 32 * j), lv);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, x), s));
      }
    }
    const float dw = _cvtsh_ss(blk.d);
    for (int t = 0; t < T; ++t) acc[t] = step(acc[t], hsum_i32(isum[t]), 0, dw, 0.0f, xr[t][b].d, false);
  }
  for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.out + o] = acc[t];
}

// Rows [o0, o1) x all tokens: token chunks that stay in L2, then per row tiles of 4 tokens.
template <void (*Tile4)(const MatmulArgs&, int64_t, int64_t), void (*Tile1)(const MatmulArgs&, int64_t, int64_t)>
void range(const MatmulArgs& a, int64_t o0, int64_t o1) {
  for (int64_t c0 = 0; c0 < a.n_tokens; c0 += kTokenChunk) {
    const int64_t c1 = std::min(a.n_tokens, c0 + kTokenChunk);
    for (int64_t o = o0; o < o1; ++o) {
      int64_t t = c0;
      for (; t + 4 <= c1; t += 4) Tile4(a, o, t);
      for (; t < c1; ++t) Tile1(a, o, t);
    }
  }
}

}  // namespace

MatmulRangeFn matmul_kernel_kx_avx2(DType type) {
  switch (type) {
    case DType::q2_k: return range<tile_q2k<4>, tile_q2k<1>>;
    case DType::q3_k: return range<tile_q3k<4>, tile_q3k<1>>;
    case DType::iq4_xs: return range<tile_iq4xs<4>, tile_iq4xs<1>>;
    default: return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
