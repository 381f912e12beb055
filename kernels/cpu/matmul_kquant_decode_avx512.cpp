// Decode (1 to 4 tokens; Q6_K 2 to 4) of Q4_K, Q5_K and Q6_K on 512-bit vectors: 16 rows per tile with
// fewer instructions per weight byte than the 8-lane tiles of matmul_kquant_avx512.cpp,
// which spend most of their time around the dot products rather than in them.
//
// Per row and super-block:
//  - the levels of 64 elements per vector straight from the nibbles (one and, or a shift
//    and an and), in the order the bytes lie: the activations are rearranged once per
//    call to match (Q4_K/Q5_K: permute_act), so no per-row shuffles;
//  - the 6-bit scales and mins of Q4_K/Q5_K unpacked with a few vector instructions
//    (scales_mins), and each vector's scales as words by one vpshufb;
//  - vpmaddubsw + vpdpwssd per 64 elements into a 16-lane sum S, and the mins' (Q6_K:
//    the -32's) term M by one vpmaddwd on the activations' 16-element sums;
//  - S folded to 8 lanes beside M's 8, and 16 rows' [S | M] reduced together by a
//    transpose-add network to one vector of 16 S and one of 16 M.
// Then one float step per super-block for 16 rows, exactly matmul_impl.hpp's (Q4_K's
// combined step, Q5_K's two fmas, Q6_K's one), in super-block order: the integers are
// exact whatever their summation order, so the results are bit-identical to the other
// kernels. (This file alone is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni.)
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/matmul_impl.hpp"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's 512-bit intrinsics (bug 105593)

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "matmul_kquant_decode_avx512.cpp is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

namespace troupe::kernels::cpu {
namespace {

constexpr int kRows = 16;    // rows per tile: one float lane each
constexpr int kMaxTokens = 4;
// Weight blocks prefetched ahead along each row (16 rows x 8 blocks in flight; fewer
// measured slower, e.g. 4: 0.9x at 2048x8192, one token).
constexpr int64_t kAheadBlocks = 8;

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// One token's activations of a super-block in the order of Q4_K's nibble vectors: vector v
// pairs with qs[64 (v / 2)..+63] (v even: low nibbles, odd: high), i.e. elements
// 128 (v / 2) + 32 (v % 2) + [0, 32) and the 32 from 64 further on.
struct ActPerm {
  alignas(64) int8_t q[4][64];
};

void permute_act(const ActQ8K* x, int64_t nb, ActPerm* out) {
  for (int64_t b = 0; b < nb; ++b)
    for (int v = 0; v < 4; ++v) {
      const int8_t* src = x[b].qs + 128 * (v / 2) + 32 * (v % 2);
      std::memcpy(out[b].q[v], src, 32);
      std::memcpy(out[b].q[v] + 32, src + 64, 32);
    }
}

// vpshufb control (the same in every 128-bit lane's terms) giving words from bytes i
// (lanes 0, 1) and j (lanes 2, 3), zero-extended.
inline __m512i byte_words(int i, int j) {
  const __m512i wi = _mm512_set1_epi16(static_cast<int16_t>(0x8000 | i));
  const __m512i wj = _mm512_set1_epi16(static_cast<int16_t>(0x8000 | j));
  return _mm512_mask_blend_epi16(0xFFFF0000u, wi, wj);
}

// Constants of the Q4_K/Q5_K tiles, built once per call.
struct Q45Consts {
  __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512i bit4 = _mm512_set1_epi8(0x10);
  __m512i sc_shift = _mm512_set4_epi32(4, 0, 0, 0);  // dword 3 (the high mins) by 4
  __m512i sc_mask1 = _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f);
  __m512i sc_mask2 = _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0);
  __m512i scw[4] = {byte_words(0, 2), byte_words(1, 3), byte_words(4, 6), byte_words(5, 7)};
  // mins per 16 elements (the bsums' groups): min j (byte 8 + j) twice.
  __m256i minw = _mm256_setr_epi8(8, -128, 8, -128, 9, -128, 9, -128, 10, -128, 10, -128, 11, -128, 11, -128,  //
                                  12, -128, 12, -128, 13, -128, 13, -128, 14, -128, 14, -128, 15, -128, 15, -128);
  // Q5_K: the fifth bits of vector v's levels moved to bit 4 (q5_rot).
  __m512i rot[4] = {q5_rot(0), q5_rot(1), q5_rot(2), q5_rot(3)};

  // Vector v holds sub-blocks s0 (its first 32 bytes) and s0 + 2: v = 0: 0, 2; 1: 1, 3;
  // 2: 4, 6; 3: 5, 7. Sub-block s's fifth bit is bit s of qh[l], which a 64-bit rotate by
  // (4 - s) mod 64 moves to bit 4 of the same byte.
  static __m512i q5_rot(int v) {
    const int s0 = 4 * (v / 2) + v % 2, s1 = s0 + 2;
    const long long r0 = (4 - s0) & 63, r1 = (4 - s1) & 63;
    return _mm512_setr_epi64(r0, r0, r0, r0, r1, r1, r1, r1);
  }
};

// The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K/Q5_K block in every 128-bit
// lane: q4k_scale_min for all j at once, on the 12 bytes read as dwords u0, u1, u2:
//   scales 0..3 = u0 & 0x3f..,  4..7 = (u2 & 0x0f..) | ((u0 >> 2) & 0x30..)
//   mins   0..3 = u1 & 0x3f..,  4..7 = ((u2 >> 4) & 0x0f..) | ((u1 >> 2) & 0x30..)
inline __m512i scales_mins(const uint8_t* scales, const Q45Consts& k) {
  // 16 bytes from scales: the 4 after them are the block's next field, never used.
  const __m512i u = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m512i lo = _mm512_shuffle_epi32(u, static_cast<_MM_PERM_ENUM>(0 | (2 << 2) | (1 << 4) | (2 << 6)));  // u0 u2 u1 u2
  const __m512i hi = _mm512_shuffle_epi32(u, static_cast<_MM_PERM_ENUM>(0 | (0 << 2) | (1 << 4) | (1 << 6)));  // u0 u0 u1 u1
  const __m512i a = _mm512_and_si512(_mm512_srlv_epi32(lo, k.sc_shift), k.sc_mask1);
  return _mm512_ternarylogic_epi32(a, _mm512_srli_epi32(hi, 2), k.sc_mask2, 0xF8);  // a | (hi' & mask2)
}

// [S folded to 8 lanes | M]: a row's two sums side by side for the reduction.
inline __m512i pack_sums(__m512i s, __m256i m) {
  const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  return _mm512_inserti64x4(_mm512_castsi256_si512(s8), m, 1);
}

// Two rows' packed sums to one vector: per 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3].
inline __m512i pair_add(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
// Two pairs (rows 0, 1 and 2, 3) to one vector: per 128-bit lane the 4 rows' lane sums.
inline __m512i quad_add(__m512i p01, __m512i p23) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(p01, p23), _mm512_unpackhi_epi64(p01, p23));
}
// Two quartets (P: rows 0..3, Q: 4..7) to [S 0..3, M 0..3, S 4..7, M 4..7].
inline __m512i octet_add(__m512i p, __m512i q) {
  return _mm512_add_epi32(_mm512_shuffle_i64x2(p, q, 0x88), _mm512_shuffle_i64x2(p, q, 0xDD));
}

template <class Block>
const Block* block_at(const uint8_t* row, int64_t b) {
  return reinterpret_cast<const Block*>(row) + b;
}

// The 16 rows o.. for T tokens. Row supplies the type: Block; kHalfOffset, where 4 bytes
// hold the f16 d (low half) and dmin (high half; Q6_K: d in the high half); sums<T>(block,
// b, x, z), which writes z[t] = pack_sums(S, M) of token t for super-block b; and step(),
// the float step on 16 rows.
template <class Row, int T>
void rows16(const MatmulArgs& a, const Row& row, int64_t o, int64_t t0) {
  using Block = typename Row::Block;
  const int64_t nb = a.in / kQKK;
  const int64_t stride = a.w_row_stride;
  const uint8_t* w0 = a.w + o * stride;
  const ActQ8K* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const ActQ8K*>(a.xq + (t0 + t) * a.xq_row_bytes);
  // Prefetch kAheadBlocks blocks on along each row; near a row's end, the first blocks of
  // the next tile's rows instead (the next row is this tile's, already on its way).
  const int64_t wrap = kRows * stride - nb * static_cast<int64_t>(sizeof(Block));
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    alignas(64) uint32_t dd[kRows];
    const int64_t ahead = (b + kAheadBlocks) * static_cast<int64_t>(sizeof(Block)) + (b + kAheadBlocks >= nb ? wrap : 0);
    __m512i oct[2][T];
    for (int q = 0; q < 4; ++q) {
      __m512i pairs[2][T];
      for (int p = 0; p < 2; ++p) {
        __m512i z[2][T];
        for (int i = 0; i < 2; ++i) {
          const int r = 4 * q + 2 * p + i;
          const Block* blk = block_at<Block>(w0 + r * stride, b);
          const char* pf = reinterpret_cast<const char*>(w0 + r * stride) + ahead;
          for (int off = 0; off < static_cast<int>(sizeof(Block)); off += 64) _mm_prefetch(pf + off, _MM_HINT_T0);
          std::memcpy(&dd[r], reinterpret_cast<const uint8_t*>(blk) + Row::kHalfOffset, 4);
          row.template sums<T>(*blk, b, x, z[i]);
        }
        for (int t = 0; t < T; ++t) pairs[p][t] = pair_add(z[0][t], z[1][t]);
      }
      for (int t = 0; t < T; ++t) {
        const __m512i quad = quad_add(pairs[0][t], pairs[1][t]);
        if (q % 2 == 0) {
          oct[q / 2][t] = quad;
        } else {
          oct[q / 2][t] = octet_add(oct[q / 2][t], quad);
        }
      }
    }
    const __m512i ddv = _mm512_load_si512(dd);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(ddv));
    const __m512 dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(ddv, 16)));
    for (int t = 0; t < T; ++t) {
      const __m512i s = _mm512_shuffle_i64x2(oct[0][t], oct[1][t], 0x88);
      const __m512i m = _mm512_shuffle_i64x2(oct[0][t], oct[1][t], 0xDD);
      acc[t] = Row::step(acc[t], s, m, dw, dm, _mm512_set1_ps(x[t][b].d));
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (t0 + t) * a.out + o, acc[t]);
}

// Q4_K, and Q5_K (kQ5): the levels of qs[64h..64h+63] as two vectors (low nibbles, high
// nibbles), against the activations in ActPerm order.
template <bool kQ5>
struct Q45Row {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  static constexpr int kHalfOffset = 0;  // d, then dmin
  Q45Consts k;
  const ActPerm* xp[kMaxTokens] = {};

  template <int T>
  void sums(const Block& blk, int64_t b, const ActQ8K* const* x, __m512i* z) const {
    const __m512i sm = scales_mins(blk.scales, k);
    __m512i lv[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i q = load512(blk.qs + 64 * h);
      lv[2 * h] = _mm512_and_si512(q, k.low4);
      lv[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), k.low4);
    }
    if constexpr (kQ5) {
      const __m512i qh = _mm512_broadcast_i64x4(load256(blk.qh));
      for (int v = 0; v < 4; ++v)  // lv | (bit of qh moved to bit 4)
        lv[v] = _mm512_ternarylogic_epi32(lv[v], _mm512_rolv_epi64(qh, k.rot[v]), k.bit4, 0xF8);
    }
    __m512i sc[4];
    for (int v = 0; v < 4; ++v) sc[v] = _mm512_shuffle_epi8(sm, k.scw[v]);
    const __m256i mn = _mm256_shuffle_epi8(_mm512_castsi512_si256(sm), k.minw);
    for (int t = 0; t < T; ++t) {
      const ActPerm& xa = xp[t][b];
      // levels <= 31, |x| <= 127: pair sums fit int16
      __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(lv[0], _mm512_load_si512(xa.q[0])), sc[0]);
      for (int v = 1; v < 4; ++v)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lv[v], _mm512_load_si512(xa.q[v])), sc[v]);
      z[t] = pack_sums(s, _mm256_madd_epi16(load256(x[t][b].bsums), mn));
    }
  }

  static __m512 step(__m512 acc, __m512i s, __m512i m, __m512 dw, __m512 dm, __m512 dx) {
    const __m512 dwx = _mm512_mul_ps(dw, dx), dmx = _mm512_mul_ps(dm, dx);
    if constexpr (kQ5) {  // q5k_step: fma(-M, dmx, fma(S, dwx, acc))
      return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), dmx, _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dwx, acc));
    } else {  // q4k_step: acc + fma(S, dwx, -(M * dmx))
      return _mm512_add_ps(acc, _mm512_fmsub_ps(_mm512_cvtepi32_ps(s), dwx,
                                                _mm512_mul_ps(_mm512_cvtepi32_ps(m), dmx)));
    }
  }
};

// Q6_K: half h's ql[64h..] as two vectors of 64 levels (runs 0, 1 in the low nibbles, runs
// 2, 3 in the high ones) with their qh bits, against the activations as they lie; the -32
// comes back exactly as M = sum_g sc[g] * bsums[g], S - 32 M.
struct Q6Row {
  using Block = BlockQ6_K;
  static constexpr int kHalfOffset = offsetof(BlockQ6_K, d) - 2;  // scales[14..15], d: d in the high half
  __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512i bits45 = _mm512_set1_epi8(0x30);
  __m512i qh_shift = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  __m512i idx[4] = {group_words(0), group_words(1), group_words(2), group_words(3)};

  // vpermw index: vector u (half u / 2, runs 2 (u % 2), + 1) has group 4u + i / 8 in word i.
  static __m512i group_words(int u) {
    alignas(64) int16_t w[32];
    for (int i = 0; i < 32; ++i) w[i] = static_cast<int16_t>(4 * u + i / 8);
    return _mm512_load_si512(w);
  }

  template <int T>
  void sums(const Block& blk, int64_t b, const ActQ8K* const* x, __m512i* z) const {
    __m512i lv[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(blk.ql + 64 * h);
      // qh bits 0-1 belong to run 0, 2-3 to run 1 (upper 256 bits), 4-5 run 2, 6-7 run 3.
      const __m512i qh = _mm512_srlv_epi64(_mm512_broadcast_i64x4(load256(blk.qh + 32 * h)), qh_shift);
      lv[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, low4), _mm512_slli_epi16(qh, 4), bits45, 0xF8);
      lv[2 * h + 1] =
          _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), qh, bits45, 0xF8);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    __m512i sc[4];
    for (int u = 0; u < 4; ++u) sc[u] = _mm512_permutexvar_epi16(idx[u], _mm512_castsi256_si512(sc16));
    for (int t = 0; t < T; ++t) {
      const int8_t* xq = x[t][b].qs;
      // levels <= 63, |x| <= 127: pair sums fit int16
      __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(lv[0], load512(xq)), sc[0]);
      for (int u = 1; u < 4; ++u)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lv[u], load512(xq + 64 * u)), sc[u]);
      z[t] = pack_sums(s, _mm256_madd_epi16(load256(x[t][b].bsums), sc16));
    }
  }

  static __m512 step(__m512 acc, __m512i s, __m512i m, __m512, __m512 d, __m512 dx) {
    const __m512i total = _mm512_sub_epi32(s, _mm512_slli_epi32(m, 5));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, dx), acc);
  }
};

template <class Row, int T>
void rows_range(const MatmulArgs& a, const Row& row, int64_t o0, int64_t o_end, int64_t t0) {
  for (int64_t o = o0; o < o_end; o += kRows) rows16<Row, T>(a, row, o, t0);
}

template <class Row>
void tokens_range(const MatmulArgs& a, const Row& row, int64_t o0, int64_t o_end, int64_t t0, int n) {
  switch (n) {
    case 1: return rows_range<Row, 1>(a, row, o0, o_end, t0);
    case 2: return rows_range<Row, 2>(a, row, o0, o_end, t0);
    case 3: return rows_range<Row, 3>(a, row, o0, o_end, t0);
    default: return rows_range<Row, 4>(a, row, o0, o_end, t0);
  }
}

template <bool kQ5>
void q45_range(const MatmulArgs& a, int64_t o0, int64_t o_end, int64_t t0, int n) {
  const int64_t nb = a.in / kQKK;
  std::vector<ActPerm> perm(static_cast<size_t>(nb * n));
  Q45Row<kQ5> row;
  for (int t = 0; t < n; ++t) {
    permute_act(reinterpret_cast<const ActQ8K*>(a.xq + (t0 + t) * a.xq_row_bytes), nb, perm.data() + t * nb);
    row.xp[t] = perm.data() + t * nb;
  }
  tokens_range(a, row, o0, o_end, t0, n);
}

}  // namespace

int64_t kquant_decode_avx512(const MatmulArgs& a, int64_t o0, int64_t o1, int64_t t_begin) {
  const int64_t n = a.n_tokens - t_begin;
  if (n < 1 || n > kMaxTokens) return o0;
  const int64_t o_end = o0 + (o1 - o0) / kRows * kRows;
  if (o_end == o0) return o0;
  const int nt = static_cast<int>(n);
  switch (a.type) {
    case DType::q4_k: q45_range<false>(a, o0, o_end, t_begin, nt); break;
    case DType::q5_k: q45_range<true>(a, o0, o_end, t_begin, nt); break;
    case DType::q6_k:
      // One Q6_K token stays on the 8-lane tiles: its unpacking dominates both kernels
      // alike, and this one measured 0.8x on the 2048x128256 head (0.9-1.3x elsewhere).
      if (nt == 1) return o0;
      tokens_range(a, Q6Row{}, o0, o_end, t_begin, nt);
      break;
    default: return o0;
  }
  return o_end;
}

}  // namespace troupe::kernels::cpu
