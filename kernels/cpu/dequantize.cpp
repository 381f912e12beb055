// dequantize_row: GGUF blocks -> floats, one plain loop per type. This is the
// definition of each layout that tests compare the fast kernels against.
#include <cstring>

#include "kernels/cpu/block_levels.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/quant_blocks.hpp"
#include "kernels/cpu/quantize.hpp"
#include "troupe/check.hpp"

namespace troupe::kernels::cpu {
namespace {

// Element j of a 32-block's nibble array (low nibbles first, then high).
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

inline int fifth_bit(const uint8_t* qh, int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1u) << 4;
}

void dq_q4_0(const BlockQ4_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(nibble(b.qs, j) - 8) * d;
}
void dq_q4_1(const BlockQ4_1& b, float* y) {
  const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(nibble(b.qs, j)) * d + m;
}
void dq_q5_0(const BlockQ5_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>((nibble(b.qs, j) | fifth_bit(b.qh, j)) - 16) * d;
}
void dq_q5_1(const BlockQ5_1& b, float* y) {
  const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(nibble(b.qs, j) | fifth_bit(b.qh, j)) * d + m;
}
void dq_q8_0(const BlockQ8_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}
void dq_q4_k(const BlockQ4_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    q4k_scale_min(2 * c, b.scales, &sc0, &m0);
    q4k_scale_min(2 * c + 1, b.scales, &sc1, &m1);
    const uint8_t* q = b.qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      y[64 * c + l] = d * static_cast<float>(sc0) * static_cast<float>(q[l] & 0x0f) - dmin * static_cast<float>(m0);
      y[64 * c + 32 + l] = d * static_cast<float>(sc1) * static_cast<float>(q[l] >> 4) - dmin * static_cast<float>(m1);
    }
  }
}
// Q6_K, per 128-element half h: ql[64h + l] holds elements l (low) and l+64 (high),
// ql[64h + 32 + l] holds l+32 and l+96; qh[32h + l] holds their top 2 bits at 0,2,4,6.
void dq_q6_k(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    const int8_t* sc = b.scales + 8 * h;
    float* yy = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      const int g = l / 16;
      yy[l] = d * static_cast<float>(sc[g] * q0);
      yy[l + 32] = d * static_cast<float>(sc[g + 2] * q1);
      yy[l + 64] = d * static_cast<float>(sc[g + 4] * q2);
      yy[l + 96] = d * static_cast<float>(sc[g + 6] * q3);
    }
  }
}

// The new K-quants follow ggml's float steps: the group's scale (and min) as floats
// first, then scale * level (- min).
void dq_q2_k(const BlockQ2_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  int8_t q[kQKK];
  q2k_levels(b, q);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * static_cast<float>(b.scales[g] & 0x0f), ml = dmin * static_cast<float>(b.scales[g] >> 4);
    for (int l = 0; l < 16; ++l) y[16 * g + l] = dl * static_cast<float>(q[16 * g + l]) - ml;
  }
}
void dq_q3_k(const BlockQ3_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  int8_t q[kQKK];
  q3k_levels(b, q);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * static_cast<float>(q3k_scale(g, b.scales) - 32);
    for (int l = 0; l < 16; ++l) y[16 * g + l] = dl * static_cast<float>(q[16 * g + l]);
  }
}
void dq_q5_k(const BlockQ5_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  int8_t q[kQKK];
  q5k_levels(b, q);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    q4k_scale_min(j, b.scales, &sc, &m);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>(q[32 * j + l]) - ml;
  }
}
void dq_iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  int8_t q[kQK];
  iq4_levels32(b.qs, q);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q[j]);
}
void dq_mxfp4(const BlockMXFP4& b, float* y) {
  const float d = e8m0_half(b.e);
  int8_t q[kQK];
  mxfp4_levels32(b.qs, q);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q[j]);
}
void dq_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  int8_t q[kQKK];
  iq4xs_levels(b, q);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * static_cast<float>(iq4xs_scale(j, b) - 32);
    for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>(q[32 * j + l]);
  }
}

template <class Block>
void dq_blocks(const void* src, float* dst, int64_t n, int64_t block, void (*fn)(const Block&, float*)) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / block; ++i) fn(b[i], dst + i * block);
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  TROUPE_CHECK(supports_type(type), "dequantize_row: unsupported type");
  TROUPE_CHECK(row_bytes(type, n) >= 0, "dequantize_row: n is not a whole number of blocks");
  if (type == kMxfp4) return dq_blocks<BlockMXFP4>(src, dst, n, kQK, dq_mxfp4);  // no enumerator to switch on
  switch (type) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::f16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::bf16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case DType::q4_0: return dq_blocks<BlockQ4_0>(src, dst, n, kQK, dq_q4_0);
    case DType::q4_1: return dq_blocks<BlockQ4_1>(src, dst, n, kQK, dq_q4_1);
    case DType::q5_0: return dq_blocks<BlockQ5_0>(src, dst, n, kQK, dq_q5_0);
    case DType::q5_1: return dq_blocks<BlockQ5_1>(src, dst, n, kQK, dq_q5_1);
    case DType::q8_0: return dq_blocks<BlockQ8_0>(src, dst, n, kQK, dq_q8_0);
    case DType::q4_k: return dq_blocks<BlockQ4_K>(src, dst, n, kQKK, dq_q4_k);
    case DType::q6_k: return dq_blocks<BlockQ6_K>(src, dst, n, kQKK, dq_q6_k);
    case DType::q2_k: return dq_blocks<BlockQ2_K>(src, dst, n, kQKK, dq_q2_k);
    case DType::q3_k: return dq_blocks<BlockQ3_K>(src, dst, n, kQKK, dq_q3_k);
    case DType::q5_k: return dq_blocks<BlockQ5_K>(src, dst, n, kQKK, dq_q5_k);
    case DType::iq4_nl: return dq_blocks<BlockIQ4_NL>(src, dst, n, kQK, dq_iq4_nl);
    case DType::iq4_xs: return dq_blocks<BlockIQ4_XS>(src, dst, n, kQKK, dq_iq4_xs);
    default: return;
  }
}

}  // namespace troupe::kernels::cpu
