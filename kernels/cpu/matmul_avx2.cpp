// AVX2/FMA/F16C matmul kernels (this file alone is built with -mavx2 -mfma -mf16c):
// the activation quantizer and float weights here, the 32-element block types from
// matmul_q8_avx2.hpp, the K-quants and IQ4_XS from matmul_kquant_avx2.hpp and
// matmul_kx_avx2.hpp.
//
// The float kernels compute a tile of R weight rows x T tokens per
// pass over the rows' blocks: a weight block is unpacked once and used for T
// tokens, an activation block is loaded once and used for R rows, so batches
// stream the weights once per call, not once per token.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/matmul_kquant_avx2.hpp"
#include "kernels/cpu/matmul_kx_avx2.hpp"
#include "kernels/cpu/matmul_q4q5_avx2.hpp"
#include "kernels/cpu/matmul_q8_avx2.hpp"

namespace troupe::kernels::cpu {

// Bit-identical to quantize_act_q16: the same float operations per element
// (amax, d = amax / 32767, x * (1 / d), round half to even, clamp), eight at a time.
void quantize_act_q16_avx2(const float* x, int64_t n, ActQ16* out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 lim = _mm256_set1_ps(32767.0f);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* s = x + b * kQK;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(s + 8 * i);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign_mask, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 32767.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i sum = _mm256_setzero_si256();
    __m256i q32[4];
    for (int i = 0; i < 4; ++i) {
      __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_max_ps(_mm256_min_ps(r, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
      q32[i] = _mm256_cvtps_epi32(r);
      sum = _mm256_add_epi32(sum, q32[i]);
    }
    // Pack to int16 in element order (packs works per 128-bit lane; permute restores order).
    const __m256i p01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q32[0], q32[1]), 0xD8);
    const __m256i p23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q32[2], q32[3]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs + 16), p23);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    out[b].d = d;
    out[b].s = d * static_cast<float>(_mm_cvtsi128_si32(s4));
  }
}

// Bit-identical to quantize_act_q8: amax, d = amax / 127, x * (1 / d), round half to
// even, clamp, eight at a time.
void quantize_act_q8_avx2(const float* x, int64_t n, ActQ8* out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 lim = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* s = x + b * kQK;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(s + 8 * i);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign_mask, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i sum = _mm256_setzero_si256();
    __m256i q32[4];
    for (int i = 0; i < 4; ++i) {
      __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_max_ps(_mm256_min_ps(r, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
      q32[i] = _mm256_cvtps_epi32(r);
      sum = _mm256_add_epi32(sum, q32[i]);
    }
    // Pack to int8 in element order (the packs work per 128-bit lane; the permute restores order).
    const __m256i p16a = _mm256_packs_epi32(q32[0], q32[1]);
    const __m256i p16b = _mm256_packs_epi32(q32[2], q32[3]);
    const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p8);
    out[b].d = d;
    out[b].sum = hsum_epi32(sum);
  }
}

// The same integers as quantize_act_q8k (matmul_impl.hpp): d = absmax / 127, q = round(x / d)
// (to nearest even), the sums of 16.
void quantize_act_q8k_avx2(const float* x, int64_t n, ActQ8K* out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 lim = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* s = x + b * kQKK;
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < kQKK / 8; ++i) m = _mm256_max_ps(m, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(s + 8 * i)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    for (int k = 0; k < kQKK / 32; ++k) {  // 32 elements: bsums 2k and 2k + 1
      __m256i q32[4];
      for (int i = 0; i < 4; ++i) {
        // |x * id| <= 127 up to rounding, so the clamp (as in quantize_act_q8_avx2) changes
        // no value the portable quantizer produces.
        __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(s + 32 * k + 8 * i), id),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm256_max_ps(_mm256_min_ps(r, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
        q32[i] = _mm256_cvtps_epi32(r);
      }
      out[b].bsums[2 * k] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q32[0], q32[1])));
      out[b].bsums[2 * k + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q32[2], q32[3])));
      const __m256i p16a = _mm256_packs_epi32(q32[0], q32[1]);
      const __m256i p16b = _mm256_packs_epi32(q32[2], q32[3]);
      const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs + 32 * k), p8);
    }
    out[b].d = d;
  }
}

namespace {

// Float weights: 8 elements at a time, converted on the fly.
template <DType K>
inline __m256 load8(const uint8_t* row, int64_t i) {
  if constexpr (K == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (K == DType::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
}

template <DType K>
inline float load1(const uint8_t* row, int64_t i) {
  if constexpr (K == DType::f32) {
    return reinterpret_cast<const float*>(row)[i];
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    if constexpr (K == DType::f16) return h2f(h);
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16)));
  }
}

template <DType K, int R, int T>
inline void tile_f(const MatmulArgs& a, int64_t o, int64_t t0) {
  const uint8_t* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = a.w + (o + r) * a.w_row_stride;
  const float* xr[T];
  for (int t = 0; t < T; ++t) xr[t] = a.xf + (t0 + t) * a.in;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t n8 = a.in & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load8<K>(wr[r], i);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(xr[t] + i);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t i = n8; i < a.in; ++i) s += load1<K>(wr[r], i) * xr[t][i];
      a.y[(t0 + t) * a.out + o + r] = s;
    }
}

// Walk rows [o0, o1) x all tokens in tiles: tokens in chunks that stay in L2,
// then row tiles of R, then token tiles of T; tails with smaller tiles.
template <int R, int T, class TileRT, class TileR1, class Tile1T, class Tile11>
inline void walk(const MatmulArgs& a, int64_t o0, int64_t o1, TileRT rt, TileR1 r1, Tile1T t1x, Tile11 one) {
  for (int64_t c0 = 0; c0 < a.n_tokens; c0 += kTokenChunk) {
    const int64_t c1 = std::min(a.n_tokens, c0 + kTokenChunk);
    int64_t o = o0;
    for (; o + R <= o1; o += R) {
      int64_t t = c0;
      for (; t + T <= c1; t += T) rt(a, o, t);
      for (; t < c1; ++t) r1(a, o, t);
    }
    for (; o < o1; ++o) {
      int64_t t = c0;
      for (; t + T <= c1; t += T) t1x(a, o, t);
      for (; t < c1; ++t) one(a, o, t);
    }
  }
}

template <DType K>
void range_f(const MatmulArgs& a, int64_t o0, int64_t o1) {
  if (a.n_tokens == 1) {
    walk<1, 1>(a, o0, o1, tile_f<K, 1, 1>, tile_f<K, 1, 1>, tile_f<K, 1, 1>, tile_f<K, 1, 1>);
  } else {
    walk<2, 4>(a, o0, o1, tile_f<K, 2, 4>, tile_f<K, 2, 1>, tile_f<K, 1, 4>, tile_f<K, 1, 1>);
  }
}

}  // namespace

MatmulRangeFn matmul_kernel_avx2(DType type) {
  if (type == kMxfp4) return b8_kernel(type);  // no enumerator to switch on
  switch (type) {
    case DType::f32: return range_f<DType::f32>;
    case DType::f16: return range_f<DType::f16>;
    case DType::bf16: return range_f<DType::bf16>;
    case DType::q4_0: case DType::q5_0: case DType::iq4_nl: return b8_kernel(type);
    case DType::q4_1: case DType::q5_1: case DType::q8_0: return q8_kernel(type);
    case DType::q4_k: case DType::q5_k: case DType::q6_k: return kquant_kernel(type);
    case DType::q2_k: case DType::q3_k: case DType::iq4_xs: return kx_kernel(type);
    default: return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
