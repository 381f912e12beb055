// The 16x16 transpose of 32-bit lanes on 512-bit vectors, shared by the AVX-512
// translation units (internal linkage: each keeps its own copy).
#pragma once

#include <immintrin.h>

namespace troupe::kernels::cpu {
namespace {

// out[i] = element i of every r[t]: the 16x16 transpose of 32-bit lanes.
inline void transpose16(const __m512i* r, __m512i* out) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);      // per 128-bit lane: a0 b0 a1 b1
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);  // a2 b2 a3 b3
  }
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);  // a0 b0 c0 d0
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  // Lane L of u[4k + j] holds element 4L + j of rows 4k..4k+3.
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    out[j] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    out[4 + j] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    out[8 + j] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    out[12 + j] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
