// The Q2_K, Q3_K and IQ4_XS matmul kernels against ActQ8K (8-bit) activations, included
// by the AVX2 translation units after matmul_kquant_avx2.hpp (plain AVX2, AVX-VNNI, and
// AVX-512 VNNI, whose 512-bit tiles are in matmul_kquant_avx512.cpp): the tiles of Q4_K,
// Q5_K and Q6_K for these types' layouts.
//
// Decode and small batches: R rows x T tokens (R * T = 8) with one 8-lane float step
// per super-block (reduce8_epi32), as tile_q6k. Batches: ActQ8Kx16 groups with the tokens
// in lanes, as tile_kquant_halves, the levels unpacked once per row and super-block
// (KxW traits below) and each broadcast quad multiplied with 8 tokens' quads.
//
// Every lane computes matmul_impl.hpp's per-(row, token) arithmetic exactly: the integer
// sums S (and M) of a super-block, then the shared float steps, so the results are
// bit-identical to matmul_scalar.cpp on every ISA. Levels are made unsigned for
// vpmaddubsw/vpdpbusd with an offset that comes back exactly through the activations'
// sums (Q3_K: level + 4; IQ4_XS with vpdpbusd: level + 128); Q2_K's batch tiles take
// level x scale (<= 45) as their bytes.
#pragma once

#include "kernels/cpu/matmul_kquant_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

// The 16 Q3_K scales minus 32 (-32..31) as bytes (q3k_scale for every group at once).
inline __m128i q3k_scales16(const uint8_t* s) {
  uint64_t lo;
  uint32_t hi;
  std::memcpy(&lo, s, 8);
  std::memcpy(&hi, s + 8, 4);
  constexpr uint64_t m4 = 0x0f0f0f0f0f0f0f0full;
  constexpr uint32_t m2 = 0x03030303u;
  // Group g = 4q + i takes bits 2q..2q+1 of byte 8 + i as its high bits.
  const uint64_t hi0 = (hi & m2) | (static_cast<uint64_t>((hi >> 2) & m2) << 32);
  const uint64_t hi1 = ((hi >> 4) & m2) | (static_cast<uint64_t>((hi >> 6) & m2) << 32);
  const uint64_t g0 = (lo & m4) | (hi0 << 4), g1 = ((lo >> 4) & m4) | (hi1 << 4);
  return _mm_sub_epi8(_mm_set_epi64x(static_cast<long long>(g1), static_cast<long long>(g0)), _mm_set1_epi8(32));
}

// The 8 IQ4_XS scales minus 32 as the low 8 bytes (iq4xs_scale for every sub-block).
inline __m128i iq4xs_scales8(const BlockIQ4_XS& b) {
  uint32_t l;
  std::memcpy(&l, b.scales_l, 4);
  uint64_t x = l;  // nibble j -> byte j
  x = (x | (x << 16)) & 0x0000ffff0000ffffull;
  x = (x | (x << 8)) & 0x00ff00ff00ff00ffull;
  x = (x | (x << 4)) & 0x0f0f0f0f0f0f0f0full;
  uint64_t y = (b.scales_h & 0xffu) | (static_cast<uint64_t>(b.scales_h >> 8) << 32);  // bit pair j -> byte j
  y = (y | (y << 12)) & 0x000f000f000f000full;
  y = (y | (y << 6)) & 0x0303030303030303ull;
  return _mm_sub_epi8(_mm_cvtsi64_si128(static_cast<long long>(x | (y << 4))), _mm_set1_epi8(32));
}

// Bit p (0..7) of every byte of v moved to bit 2 (the high bit of Q3_K's level + 4).
inline __m256i bit_to_4(__m256i v, int p) {
  const __m256i moved = p >= 2 ? _mm256_srli_epi16(v, p - 2) : _mm256_slli_epi16(v, 2 - p);
  return _mm256_and_si256(moved, _mm256_set1_epi8(4));
}

// Elements 128h + 32j + 0..31 of a Q3_K block as level + 4 (0..7): bit pairs 2j of
// qs[32h..], high bit 4h + j of hmask.
inline __m256i q3k_levels32(__m256i qs_h, __m256i hm, int h, int j) {
  return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs_h, 2 * j), _mm256_set1_epi8(3)), bit_to_4(hm, 4 * h + j));
}

// Run j of 32 IQ4_XS elements as signed grid levels (low nibbles first).
inline __m256i iq4_levels32v(const uint8_t* qs, __m256i grid) {
  const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_shuffle_epi8(
      grid, _mm256_and_si256(_mm256_srlv_epi32(raw, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f)));
}

inline __m256i iq4_grid256() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
}

// shuffle_epi8 control giving word 2j of each 128-bit lane in the low lane and word
// 2j + 1 in the high one (Q6_K's run j: groups 2j and 2j + 1 of 8 scales).
inline __m256i pair_ctrl(int j) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * j + 2) | ((4 * j + 3) << 8))),
                          _mm_set1_epi16(static_cast<int16_t>((4 * j) | ((4 * j + 1) << 8))));
}

// Q2_K (kKind 2) and Q3_K (3): runs of 32 elements from 32 bytes of bit pairs per half,
// 16-element groups (one per 128-bit lane), signed scales. Q3_K's levels + 4 come back
// through - 4 * sum_g sc[g] * bsums[g]; Q2_K's mins through M.
template <int kKind, int R, int T>
void tile_q23k(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  constexpr bool kQ3 = kKind == 3;
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  const KTile<Block, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8], m[8];
    LaneScales<R, T> ls;
    for (int r = 0; r < R; ++r) {
      const Block& blk = k.w[r][b];
      prefetch_block<sizeof(Block)>(&blk, ahead);
      __m128i sc8;
      __m256i hm = _mm256_setzero_si256();
      if constexpr (kQ3) {
        sc8 = q3k_scales16(blk.scales);
        hm = load256u(blk.hmask);
      } else {
        sc8 = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)), _mm_set1_epi8(0x0f));
      }
      if constexpr (kQ3) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        for (int t = 0; t < T; ++t)  // - 4 * sum_g sc[g] * bsums[g]
          s[t * R + r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                          _mm256_slli_epi32(_mm256_madd_epi16(load256u(k.x[t][b].bsums), sc16), 2));
      } else {
        const __m256i mn16 = _mm256_cvtepu8_epi16(
            _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)), 4),
                          _mm_set1_epi8(0x0f)));
        for (int t = 0; t < T; ++t) {
          s[t * R + r] = _mm256_setzero_si256();
          m[t * R + r] = _mm256_madd_epi16(load256u(k.x[t][b].bsums), mn16);
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i qb = load256u(blk.qs + 32 * h);
        // Scales 8h..8h+7 in both 128-bit lanes; run j takes 8h + 2j (low lane) and + 1 (high).
        const __m256i sch_h = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
        for (int j = 0; j < 4; ++j) {
          const __m256i lv = kQ3 ? q3k_levels32(qb, hm, h, j)
                                 : _mm256_and_si256(_mm256_srli_epi16(qb, 2 * j), _mm256_set1_epi8(3));
          const __m256i sj = _mm256_shuffle_epi8(sch_h, pair_ctrl(j));
          for (int t = 0; t < T; ++t) {  // levels <= 7, |x| <= 127: pair sums fit int16
            __m256i& acc_i = s[t * R + r];
            acc_i = dot_pairs_acc(acc_i, _mm256_maddubs_epi16(lv, load256u(k.x[t][b].qs + 128 * h + 32 * j)), sj);
          }
        }
      }
      if constexpr (R != 8) {
        float dmin = 0.0f;
        if constexpr (!kQ3) dmin = h2f(blk.dmin);
        ls.set(r, h2f(blk.d), dmin, k.x, b);
      }
    }
    if constexpr (R == 8) {  // d (and dmin) from the blocks (halves8, matmul_kquant_avx2.hpp)
      const __m256 dx = _mm256_set1_ps(k.x[0][b].d);
      if constexpr (kQ3) {
        acc = plain_step8(acc, s, k.w, b, offsetof(Block, d), k.x[0]);
      } else {
        __m256 dw, dm;
        dmin_pairs8(k.w, b, offsetof(Block, d), &dw, &dm);
        acc = tile_step<KStep::q5k>(acc, s, m, dw, dm, dx);
      }
    } else {
      acc = tile_step<kQ3 ? KStep::plain : KStep::q5k>(acc, s, m, ls);
    }
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

// IQ4_XS: per sub-block the nibbles look up signed grid levels (vpshufb); vpmaddubsw takes
// |level| and the activation with the level's sign (pair sums <= 2 x 127 x 127 fit int16).
template <int R, int T>
void tile_iq4xs(const MatmulArgs& a, int64_t o, int64_t t0, int nr, int nt) {
  static_assert(R * T == 8, "8 lanes");
  const KTile<BlockIQ4_XS, R, T> k(a, o, t0, nr, nt);
  const int64_t nb = a.in / kQKK;
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, 8 * a.w_row_stride);
  const __m256i grid = iq4_grid256();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[8];
    LaneScales<R, T> ls;
    for (int r = 0; r < R; ++r) {
      const BlockIQ4_XS& blk = k.w[r][b];
      prefetch_block<sizeof(BlockIQ4_XS)>(&blk, ahead);
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(iq4xs_scales8(blk)));
      // Two chains per output (even and odd sub-blocks): half the dependent vpdpwssd.
      __m256i s2[T][2];
      for (int t = 0; t < T; ++t) s2[t][0] = s2[t][1] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i lv = iq4_levels32v(blk.qs + 16 * j, grid);
        const __m256i mag = _mm256_sign_epi8(lv, lv);
        const __m256i sj = _mm256_shuffle_epi8(sc16, word_ctrl(j));
        for (int t = 0; t < T; ++t) {
          __m256i& acc_i = s2[t][j % 2];
          acc_i = dot_pairs_acc(acc_i, _mm256_maddubs_epi16(mag, _mm256_sign_epi8(load256u(k.x[t][b].qs + 32 * j), lv)),
                                sj);
        }
      }
      for (int t = 0; t < T; ++t) s[t * R + r] = _mm256_add_epi32(s2[t][0], s2[t][1]);
      if constexpr (R != 8) ls.set(r, h2f(blk.d), 0.0f, k.x, b);
    }
    if constexpr (R == 8) acc = plain_step8(acc, s, k.w, b, offsetof(BlockIQ4_XS, d), k.x[0]);
    else acc = tile_step<KStep::plain>(acc, s, nullptr, ls);
  }
  store_lanes<R, T>(a, o, t0, nr, nt, acc);
}

template <int R, int T>
struct Q2KTile {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q23k<2, R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct Q3KTile {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_q23k<3, R, T>(a, o, t, nr, nt); }
};
template <int R, int T>
struct IQ4XSTile {
  static void run(const MatmulArgs& a, int64_t o, int64_t t, int nr, int nt) { tile_iq4xs<R, T>(a, o, t, nr, nt); }
};

// Weight traits of the batch tiles: a super-block unpacked to bytes in element order
// (lv), per-group integer scales and mins, and how the group sums become S:
//  kGroup      elements per scale (16 or 32)
//  kOffsetLog2 lv holds level + 2^kOffsetLog2 (0: none), taken back through the
//              activations' sums per group (bs16 for 16-element groups, bs for 32)
//  kFold16     |group sum| < 2^15, so a vpmaddwd/vpdpwssd with (scale, 0) scales it
//  kPrescaled  lv already holds level x scale (S is one sum of products)
//  kSigned     lv holds signed levels (vpmaddubsw with the signs moved to x)
//  kMins       M from the 16-element sums (Q2_K's step)
struct Q3KW {
  using Block = BlockQ3_K;
  static constexpr int kGroup = 16, kOffsetLog2 = 2;
  static constexpr bool kFold16 = true, kPrescaled = false, kSigned = false, kMins = false;
  static void unpack(const Block& b, uint8_t* lv, int16_t* sc, uint8_t*) {
    const __m256i hm = load256u(b.hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i qb = load256u(b.qs + 32 * h);
      for (int j = 0; j < 4; ++j)
        _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 128 * h + 32 * j), q3k_levels32(qb, hm, h, j));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc), _mm256_cvtepi8_epi16(q3k_scales16(b.scales)));
  }
  static float dmin(const Block&) { return 0.0f; }
};

// Q2_K: levels 0..3 times their 4-bit scale (<= 45) in the bytes: vpmullw on the byte pairs
// cannot carry into the high byte.
struct Q2KW {
  using Block = BlockQ2_K;
  static constexpr int kGroup = 16, kOffsetLog2 = 0;
  static constexpr bool kFold16 = false, kPrescaled = true, kSigned = false, kMins = true;
  static void unpack(const Block& b, uint8_t* lv, int16_t*, uint8_t* mn) {
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i sc8 = _mm_and_si128(sm, _mm_set1_epi8(0x0f));
    for (int h = 0; h < 2; ++h) {
      const __m256i qb = load256u(b.qs + 32 * h);
      const __m256i sch_h = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
      for (int j = 0; j < 4; ++j) {
        const __m256i l = _mm256_and_si256(_mm256_srli_epi16(qb, 2 * j), _mm256_set1_epi8(3));
        _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 128 * h + 32 * j),
                           _mm256_mullo_epi16(l, _mm256_shuffle_epi8(sch_h, pair_ctrl(j))));
      }
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(mn), _mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0f)));
  }
  static float dmin(const Block& b) { return h2f(b.dmin); }
};

// IQ4_XS: grid level + 128 (1..241) where vpdpbusd sums the quads in 32 bits, else the
// signed level (the plain AVX2 vpmaddubsw path).
struct IQ4XSW {
  using Block = BlockIQ4_XS;
  static constexpr int kGroup = 32, kOffsetLog2 = kHaveDpbusd ? 7 : 0;
  static constexpr bool kFold16 = false, kPrescaled = false, kSigned = !kHaveDpbusd, kMins = false;
  static void unpack(const Block& b, uint8_t* lv, int16_t* sc, uint8_t*) {
    const __m256i grid = iq4_grid256();
    for (int j = 0; j < 8; ++j) {
      __m256i l = iq4_levels32v(b.qs + 16 * j, grid);
      if constexpr (kHaveDpbusd) l = _mm256_xor_si256(l, _mm256_set1_epi8(static_cast<char>(0x80)));  // + 128
      _mm256_store_si256(reinterpret_cast<__m256i*>(lv + 32 * j), l);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sc), _mm_cvtepi8_epi16(iq4xs_scales8(b)));
  }
  static float dmin(const Block&) { return 0.0f; }
};

// acc + the quads' products of weight bytes wq (unsigned, or signed with kSigned) and x.
template <bool kSigned>
inline __m256i kx_quads_acc(__m256i acc, __m256i wq, __m256i x) {
  if constexpr (kSigned) {
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(x, wq)),
                               _mm256_set1_epi16(1)));
  } else {
    return dot_quads_acc(acc, wq, x);
  }
}

// Batches on 256-bit vectors: R rows x H halves (8 tokens each) of ActQ8Kx16 groups, as
// tile_kquant_halves.
template <class W, int R, int H>
void tile_kx_halves(const MatmulArgs& a, int64_t o, int64_t h0) {
  using Block = typename W::Block;
  constexpr int kGroup = W::kGroup, kGroups = kQKK / kGroup;
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
    asm("" : "+m"(lv));  // quads broadcast from memory (a load), not extracted
    __m256i S[R][H];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) {
        S[r][h] = _mm256_setzero_si256();
        if constexpr (W::kOffsetLog2 > 0) {  // - 2^k * sum_g sc[g] * (sum of x over g)
          __m256i off = _mm256_setzero_si256();
          for (int p = 0; p < kGroups / 2; ++p) {
            const int32_t* sums = kGroup == 16 ? xg[h][b].bs16[p] : xg[h][b].bs[p];
            off = dot_pairs_acc(off, _mm256_set1_epi32(int16_pair(sc[r][2 * p], sc[r][2 * p + 1])),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + lane[h])));
          }
          S[r][h] = _mm256_sub_epi32(S[r][h], _mm256_slli_epi32(off, W::kOffsetLog2));
        }
      }
    for (int k = 0; k < kGroups; ++k) {
      __m256i sub[R][H];
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h) sub[r][h] = W::kPrescaled ? S[r][h] : _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < kGroup / 4; ++i) {
        __m256i xv[H];
        for (int h = 0; h < H; ++h)
          xv[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg[h][b].q[kGroup / 4 * k + i] + lane[h]));
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, lv[r] + kGroup * k + 4 * i, 4);
          const __m256i wq = _mm256_set1_epi32(quad);
          for (int h = 0; h < H; ++h) sub[r][h] = kx_quads_acc<W::kSigned>(sub[r][h], wq, xv[h]);
        }
      }
      for (int r = 0; r < R; ++r) {
        for (int h = 0; h < H; ++h) {
          if constexpr (W::kPrescaled) {
            S[r][h] = sub[r][h];
          } else if constexpr (W::kFold16) {  // the low int16 of sub is sub itself
            S[r][h] = dot_pairs_acc(S[r][h], sub[r][h], _mm256_set1_epi32(static_cast<uint16_t>(sc[r][k])));
          } else {
            S[r][h] = _mm256_add_epi32(S[r][h], _mm256_mullo_epi32(sub[r][h], _mm256_set1_epi32(sc[r][k])));
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) {
        const __m256 dx = _mm256_loadu_ps(xg[h][b].d + lane[h]);
        const __m256 dwx = _mm256_mul_ps(_mm256_set1_ps(dw[r]), dx);
        if constexpr (W::kMins) {
          __m256i m = _mm256_setzero_si256();
          for (int p = 0; p < 8; ++p)
            m = dot_pairs_acc(m, _mm256_set1_epi32(int16_pair(mn[r][2 * p], mn[r][2 * p + 1])),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg[h][b].bs16[p] + lane[h])));
          acc[r][h] = q5k_step(acc[r][h], S[r][h], m, dwx, _mm256_mul_ps(_mm256_set1_ps(dm[r]), dx));
        } else {
          acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[r][h]), dwx, acc[r][h]);
        }
      }
  }
  for (int h = 0; h < H; ++h) {
    const int64_t t0 = (h0 + h) * 8;
    const int n = static_cast<int>(std::min<int64_t>(8, a.n_tokens - t0));  // a partial group's last half
    for (int r = 0; r < R; ++r) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[r][h]);
      for (int l = 0; l < n; ++l) a.y[(t0 + l) * a.out + o + r] = lanes[l];
    }
  }
}

// Groups of 16 tokens (2-row tiles over a group's two halves; plain AVX2 also takes a
// last partial one, act_groups16_q8k), then the tokens after them in the R x T tiles.
template <class W, template <int, int> class Tile>
void range_kx_groups(const MatmulArgs& a, int64_t o0, int64_t o1) {
  for (int64_t g = 0; g < a.n_groups_k; ++g) {
    int64_t o = o0;
    for (; o + 2 <= o1; o += 2) tile_kx_halves<W, 2, 2>(a, o, 2 * g);
    for (; o < o1; ++o) tile_kx_halves<W, 1, 2>(a, o, 2 * g);
  }
  range_kquant_from<Tile>(a, o0, o1, a.n_groups_k * 16);
}

/// The Q2_K, Q3_K or IQ4_XS kernel, else nullptr.
inline MatmulRangeFn kx_kernel(DType type) {
  switch (type) {
    case DType::q2_k: return range_kx_groups<Q2KW, Q2KTile>;
    case DType::q3_k: return range_kx_groups<Q3KW, Q3KTile>;
    case DType::iq4_xs: return range_kx_groups<IQ4XSW, IQ4XSTile>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
