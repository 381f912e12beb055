// Block layouts of the GGUF quantized types (byte-exact with ggml's), and the
// activation formats our integer dot products consume. Internal to kernels/cpu.
#pragma once

#include <cstdint>
#include <cstring>

#include "troupe/dtype.hpp"

namespace troupe::kernels::cpu {

constexpr int kQK = 32;    // elements per block of the 32-wide types
constexpr int kQKK = 256;  // elements per K-quant super-block

// Weights. Halves are stored as raw uint16_t bits.
// Q4_0: x = (q - 8) * d; qs[j] low nibble is element j, high nibble element j + 16.
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
// Q4_1: x = q * d + m; nibbles as Q4_0.
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQK / 2]; };
// Q5_0: x = (q - 16) * d; bit j of the little-endian qh word is the fifth bit of element j.
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
// Q5_1: x = q * d + m; bits as Q5_0.
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
// Q8_0: x = q * d.
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };
// Q4_K: 8 sub-blocks of 32, x = d * sc[j] * q - dmin * m[j], with sc/m 6-bit packed in
// `scales`; qs byte 32c + l holds element 64c + l (low nibble) and 64c + 32 + l (high).
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[kQKK / 2]; };
// Q6_K: 16 groups of 16, x = d * scales[g] * (q - 32); q = 4 low bits from ql and
// 2 high bits from qh, interleaved per 128-element half (see dequantize.cpp).
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };

// Q2_K: 16 groups of 16, x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q in 0..3.
// Element 128h + 32j + 16k + l is bits 2j..2j+1 of qs[32h + 16k + l] (group 8h + 2j + k).
struct BlockQ2_K { uint8_t scales[kQKK / 16]; uint8_t qs[kQKK / 4]; uint16_t d; uint16_t dmin; };
// Q3_K: 16 groups of 16, x = d * (s[g] - 32) * q, q in -4..3: the 2 low bits as Q2_K's
// qs, minus 4 unless bit (4h + j) of hmask[16k + l] is set; s[g] 6-bit packed (q3k_scale).
struct BlockQ3_K { uint8_t hmask[kQKK / 8]; uint8_t qs[kQKK / 4]; uint8_t scales[12]; uint16_t d; };
// Q5_K: Q4_K's scales and nibbles plus a fifth bit: element 64c + l has bit 2c of qh[l],
// element 64c + 32 + l bit 2c + 1; x = d * sc[j] * q - dmin * m[j], q in 0..31.
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
// IQ4_NL: x = d * kIq4Values[nibble]; nibbles as Q4_0.
struct BlockIQ4_NL { uint16_t d; uint8_t qs[kQK / 2]; };
// IQ4_XS: 8 sub-blocks of 32 as IQ4_NL blocks sharing d, x = d * (ls[j] - 32) * kIq4Values[nibble];
// ls[j] = 4 bits of scales_l (iq4xs_scale) and 2 of scales_h.
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[kQKK / 64]; uint8_t qs[kQKK / 2]; };

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): a non-uniform 4-bit grid.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// MXFP4 (GGUF type 39, gpt-oss's experts): x = e8m0_half(e) * kMxfp4Values[nibble], nibbles
// as Q4_0. ggml keeps the E2M1 values doubled (integers) and halves the E8M0 scale instead.
struct BlockMXFP4 { uint8_t e; uint8_t qs[kQK / 2]; };
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
/// The type id: no DType enumerator (the SDK's dtype.hpp stays as it is).
inline constexpr DType kMxfp4 = static_cast<DType>(39);
/// 2^(e - 128), exactly (ggml_e8m0_to_fp32_half; e < 2 are subnormal floats).
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17,
              "block layouts must match GGUF");

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ6_K) == 210, "block layouts must match GGUF");

// Activations, quantized once per matmul (our own formats, never stored in files).
// ActQ16: 32 activations, x = q * d, |q| <= 32767, s = d * sum(q) (serves the
// min/offset terms). 16 bits, not llama.cpp's 8: with 8-bit activations small
// models' greedy answers hinge on how exact rounding ties fall (SmolLM2-135M's
// first token for "What is the capital of France?" flips with the tie rule).
struct ActQ16 { float d; float s; int16_t qs[kQK]; };
// ActQ16x8: one block of 8 tokens' ActQ16 activations with the tokens in lanes, for
// batched matmuls: q[i][t] holds elements 2i and 2i+1 of token t (two int16, the
// lower element in the low half), d[t] and s[t] as in ActQ16. Unused lanes are zero.
struct ActQ16x8 { float d[8]; float s[8]; int32_t q[kQK / 2][8]; };
// ActQ16x16: the same for 16 tokens (one 512-bit vector per pair of elements).
struct ActQ16x16 { float d[16]; float s[16]; int32_t q[kQK / 2][16]; };
// ActQ8: 32 activations at 8 bits, x = q * d, |q| <= 127, sum = sum of q: what Q4_0,
// Q5_0 and IQ4_NL weights meet (vpdpbusd / vpmaddubsw take the weights' unsigned
// levels, and sum brings back their offset: - 8 for Q4_0, - 16 for Q5_0, - 128 for
// IQ4_NL's grid values, exactly).
struct ActQ8 { float d; int32_t sum; int8_t qs[kQK]; };
// ActQ8x16: one block of 16 tokens' ActQ8 activations with the tokens in lanes, for
// batches: q[i][t] holds elements 4i..4i+3 of token t, d[t] and sum[t] as in ActQ8.
// Unused lanes are zero.
struct ActQ8x16 { float d[16]; int32_t sum[16]; int32_t q[kQK / 4][16]; };
// ActQ8K: 256 values, x = q * d, |q| <= 127; bsums[g] = sum of q over elements 16g..16g+15.
struct ActQ8K { float d; int16_t bsums[kQKK / 16]; int8_t qs[kQKK]; };
// ActQ8Kx16: one super-block of 16 tokens' ActQ8K activations with the tokens in lanes,
// for batched K-quant matmuls (AVX-512 VNNI vpdpbusd): q[i][t] holds elements 4i..4i+3
// of token t, bs[p][t] the sums of its elements 64p..64p+31 (low int16) and
// 64p+32..64p+63 (high int16), bs16[p][t] its bsums 2p (low) and 2p + 1 (high), d[t]
// its scale. Unused lanes are zero.
struct ActQ8Kx16 {
  float d[16];
  int32_t bs[kQKK / 64][16];
  int32_t bs16[kQKK / 32][16];
  int32_t q[kQKK / 4][16];
};

// Unpack the 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
inline void q4k_scale_min(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 6-bit scale (0..63, used as s - 32) of group g (0..15) of a Q3_K block: its low
// 4 bits are a nibble of bytes 0..7, its high 2 bits a pair of bytes 8..11.
inline int q3k_scale(int g, const uint8_t* s) {
  const int low = g < 8 ? (s[g] & 0x0f) : (s[g - 8] >> 4);
  const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return low | (high << 4);
}

// The 6-bit scale (0..63, used as ls - 32) of sub-block j (0..7) of an IQ4_XS block.
inline int iq4xs_scale(int j, const BlockIQ4_XS& b) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

}  // namespace troupe::kernels::cpu
