// Half (IEEE binary16) and bfloat16 conversions in portable C++, used by the
// scalar kernels and the reference quantizers (AVX2 code uses F16C instead).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace troupe::kernels::cpu {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Round to nearest, ties to even (what numpy/ggml produce).
inline uint16_t fp32_to_fp16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);  // inf / nan
  if (x >= 0x477ff000u) return sign | 0x7c00u;                                      // rounds to inf
  if (x < 0x38800000u) {                                                             // subnormal half
    const float v = std::bit_cast<float>(x) * 16777216.0f;                           // * 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(v));
  }
  const uint32_t rounded = x + 0xfffu + ((x >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace troupe::kernels::cpu
