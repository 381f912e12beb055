// Integer levels of the Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS and MXFP4 blocks in element
// order: the one reading of their bit layouts that dequantize_row and the
// portable matmul share (quant_blocks.hpp documents the layouts).
#pragma once

#include <cstdint>

#include "kernels/cpu/quant_blocks.hpp"

namespace troupe::kernels::cpu {

// q[e] = level of element e (0..3).
inline void q2k_levels(const BlockQ2_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 16; ++l)
          q[128 * h + 32 * j + 16 * k + l] = static_cast<int8_t>((b.qs[32 * h + 16 * k + l] >> (2 * j)) & 3);
}

// q[e] = level of element e (-4..3).
inline void q3k_levels(const BlockQ3_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 16; ++l) {
          const int low = (b.qs[32 * h + 16 * k + l] >> (2 * j)) & 3;
          const bool high = (b.hmask[16 * k + l] >> (4 * h + j)) & 1;
          q[128 * h + 32 * j + 16 * k + l] = static_cast<int8_t>(low - (high ? 0 : 4));
        }
}

// q[e] = level of element e (0..31).
inline void q5k_levels(const BlockQ5_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>((b.qs[32 * c + l] & 0x0f) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      q[64 * c + 32 + l] = static_cast<int8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
}

// q[e] = grid value of element e of a 32-element run of IQ4 nibbles (low nibbles first).
inline void iq4_levels32(const uint8_t* qs, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kIq4Values[qs[j] & 0x0f];
    q[j + 16] = kIq4Values[qs[j] >> 4];
  }
}

// q[e] = the doubled E2M1 value of element e of an MXFP4 block (-12..12).
inline void mxfp4_levels32(const uint8_t* qs, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kMxfp4Values[qs[j] & 0x0f];
    q[j + 16] = kMxfp4Values[qs[j] >> 4];
  }
}

inline void iq4xs_levels(const BlockIQ4_XS& b, int8_t* q) {
  for (int j = 0; j < 8; ++j) iq4_levels32(b.qs + 16 * j, q + 32 * j);
}

}  // namespace troupe::kernels::cpu
