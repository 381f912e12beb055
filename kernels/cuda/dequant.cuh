// Device-side reading of one weight element from a GGUF row: the same
// formulas as kernels/cpu/dequantize.cpp (the definition of each layout),
// element by element. Every field is read byte by byte, so rows need no
// alignment beyond what the float types ask for (checked by the launchers).
// Internal to kernels/cuda. Host-and-device code, so that a unit test without
// a GPU (tests/kernels/cuda/test_cuda_dequant_host.cpp) checks these formulas
// against kernels/cpu on the CPU.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>  // __host__ / __device__ when a host compiler includes this

#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_blocks.hpp"  // block structs: sizes and field order of every layout
#include "troupe/dtype.hpp"

namespace troupe::kernels::cuda::detail {

namespace blocks = troupe::kernels::cpu;

#define TROUPE_HD __host__ __device__ __forceinline__

TROUPE_HD float half_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
TROUPE_HD float bf16_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(uint32_t{h} << 16);
#else
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}
TROUPE_HD uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
TROUPE_HD float load_half(const uint8_t* p) { return half_bits_to_float(load_u16(p)); }

// Scale and min of sub-block j (0..7) of a Q4_K block (kernels/cpu/quant_blocks.hpp, q4k_scale_min).
TROUPE_HD void q4k_scale_min(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Element j (0..31) of a 32-block's nibble array: low nibbles first, then high.
TROUPE_HD int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }
TROUPE_HD int fifth_bit(const uint8_t* qh, int j) {
  return ((qh[j >> 3] >> (j & 7)) & 1) << 4;  // bit j of the little-endian 32-bit word
}

// The IQ4_NL / IQ4_XS grid (kernels/cpu/quant_blocks.hpp, kIq4Values), as a local
// table so device code needs no global memory symbol.
TROUPE_HD int iq4_value(int n) {
  constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return kValues[n];
}

// MXFP4's doubled E2M1 values (kernels/cpu/quant_blocks.hpp, kMxfp4Values) and its E8M0
// scale halved, 2^(e - 128) exactly (e8m0_half).
TROUPE_HD int mxfp4_value(int n) {
  constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return kValues[n];
}
TROUPE_HD float e8m0_half_bits(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The 6-bit scale of group g (0..15) of a Q3_K block (kernels/cpu/quant_blocks.hpp, q3k_scale).
TROUPE_HD int q3k_scale(int g, const uint8_t* s) {
  const int low = g < 8 ? (s[g] & 0x0f) : (s[g - 8] >> 4);
  return low | (((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
}

/// Element i of a row of type T starting at `row` (the row's first block).
template <DType T>
TROUPE_HD float dq(const uint8_t* row, int64_t i) {
  if constexpr (T == DType::f32) {
    return reinterpret_cast<const float*>(row)[i];  // launchers check 4-byte alignment
  } else if constexpr (T == DType::f16) {
    return half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
  } else if constexpr (T == DType::bf16) {
    return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
  } else if constexpr (T == DType::q4_0) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockQ4_0);
    const int j = static_cast<int>(i % blocks::kQK);
    return static_cast<float>(nibble(b + 2, j) - 8) * load_half(b);
  } else if constexpr (T == DType::q4_1) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockQ4_1);
    const int j = static_cast<int>(i % blocks::kQK);
    return static_cast<float>(nibble(b + 4, j)) * load_half(b) + load_half(b + 2);
  } else if constexpr (T == DType::q5_0) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockQ5_0);
    const int j = static_cast<int>(i % blocks::kQK);
    return static_cast<float>((nibble(b + 6, j) | fifth_bit(b + 2, j)) - 16) * load_half(b);
  } else if constexpr (T == DType::q5_1) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockQ5_1);
    const int j = static_cast<int>(i % blocks::kQK);
    return static_cast<float>(nibble(b + 8, j) | fifth_bit(b + 4, j)) * load_half(b) + load_half(b + 2);
  } else if constexpr (T == DType::q8_0) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockQ8_0);
    const int j = static_cast<int>(i % blocks::kQK);
    return static_cast<float>(static_cast<int8_t>(b[2 + j])) * load_half(b);
  } else if constexpr (T == DType::q4_k) {
    // {d, dmin, scales[12], qs[128]}: qs byte 32c + l holds element 64c + l (low) and 64c + 32 + l (high).
    const uint8_t* b = row + (i / blocks::kQKK) * sizeof(blocks::BlockQ4_K);
    const int e = static_cast<int>(i % blocks::kQKK);
    const int c = e / 64, l = e % 64;
    const uint8_t* qs = b + 16;
    const int q = l < 32 ? (qs[32 * c + l] & 0x0f) : (qs[32 * c + l - 32] >> 4);
    int sc, m;
    q4k_scale_min(2 * c + (l < 32 ? 0 : 1), b + 4, &sc, &m);
    return load_half(b) * static_cast<float>(sc) * static_cast<float>(q) - load_half(b + 2) * static_cast<float>(m);
  } else if constexpr (T == DType::q6_k) {
    // {ql[128], qh[64], scales[16] (int8), d}; per 128-element half h, quarter k of 32:
    // low 4 bits from ql[64h + l (+32 for k odd)] (low nibble for k < 2), top 2 bits at 2k of qh[32h + l].
    const uint8_t* b = row + (i / blocks::kQKK) * sizeof(blocks::BlockQ6_K);
    const int e = static_cast<int>(i % blocks::kQKK);
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo = b[64 * h + l + (k & 1) * 32];
    const int low4 = k < 2 ? (lo & 0x0f) : (lo >> 4);
    const int high2 = (b[128 + 32 * h + l] >> (2 * k)) & 3;
    const int q = (low4 | (high2 << 4)) - 32;
    const int sc = static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * k]);
    return load_half(b + 208) * static_cast<float>(sc * q);
  } else if constexpr (T == DType::q2_k) {
    // {scales[16], qs[64], d, dmin}: element 128h + 32j + kl is bits 2j of qs[32h + kl], group e / 16.
    const uint8_t* b = row + (i / blocks::kQKK) * sizeof(blocks::BlockQ2_K);
    const int e = static_cast<int>(i % blocks::kQKK);
    const int h = e / 128, j = (e % 128) / 32, kl = e % 32;
    const int q = (b[16 + 32 * h + kl] >> (2 * j)) & 3;
    const int sc = b[e / 16];
    const float dl = load_half(b + 80) * static_cast<float>(sc & 0x0f);
    const float ml = load_half(b + 82) * static_cast<float>(sc >> 4);
    return dl * static_cast<float>(q) - ml;
  } else if constexpr (T == DType::q3_k) {
    // {hmask[32], qs[64], scales[12], d}: Q2_K's bit pairs, minus 4 unless bit 4h + j of hmask[kl] is set.
    const uint8_t* b = row + (i / blocks::kQKK) * sizeof(blocks::BlockQ3_K);
    const int e = static_cast<int>(i % blocks::kQKK);
    const int h = e / 128, j = (e % 128) / 32, kl = e % 32;
    const int low = (b[32 + 32 * h + kl] >> (2 * j)) & 3;
    const int q = low - (((b[kl] >> (4 * h + j)) & 1) ? 0 : 4);
    const float dl = load_half(b + 108) * static_cast<float>(q3k_scale(e / 16, b + 96) - 32);
    return dl * static_cast<float>(q);
  } else if constexpr (T == DType::q5_k) {
    // {d, dmin, scales[12], qh[32], qs[128]}: Q4_K's nibbles plus bit 2c (+1 for the high nibble) of qh[l].
    const uint8_t* b = row + (i / blocks::kQKK) * sizeof(blocks::BlockQ5_K);
    const int e = static_cast<int>(i % blocks::kQKK);
    const int c = e / 64, l = e % 32, hi = (e % 64) / 32;
    const uint8_t byte = b[48 + 32 * c + l];
    const int q = (hi ? (byte >> 4) : (byte & 0x0f)) | (((b[16 + l] >> (2 * c + hi)) & 1) << 4);
    int sc, m;
    q4k_scale_min(2 * c + hi, b + 4, &sc, &m);
    const float dl = load_half(b) * static_cast<float>(sc), ml = load_half(b + 2) * static_cast<float>(m);
    return dl * static_cast<float>(q) - ml;
  } else if constexpr (T == DType::iq4_nl) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockIQ4_NL);
    const int j = static_cast<int>(i % blocks::kQK);
    return load_half(b) * static_cast<float>(iq4_value(nibble(b + 2, j)));
  } else if constexpr (T == blocks::kMxfp4) {
    const uint8_t* b = row + (i / blocks::kQK) * sizeof(blocks::BlockMXFP4);
    const int j = static_cast<int>(i % blocks::kQK);
    return e8m0_half_bits(b[0]) * static_cast<float>(mxfp4_value(nibble(b + 1, j)));
  } else if constexpr (T == DType::iq4_xs) {
    // {d, scales_h, scales_l[4], qs[128]}: sub-block ib of 32 is an IQ4_NL nibble run scaled by ls - 32.
    const uint8_t* b = row + (i / blocks::kQKK) * sizeof(blocks::BlockIQ4_XS);
    const int e = static_cast<int>(i % blocks::kQKK);
    const int ib = e / 32;
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((load_u16(b + 2) >> (2 * ib)) & 3) << 4);
    const float dl = load_half(b) * static_cast<float>(ls - 32);
    return dl * static_cast<float>(iq4_value(nibble(b + 8 + 16 * ib, e % 32)));
  } else {
    static_assert(T == DType::f32, "dq: no device reader for this type");
    return 0.0f;
  }
}

#undef TROUPE_HD

}  // namespace troupe::kernels::cuda::detail
