// Reference quantizers (float -> GGUF blocks) and the activation quantizers
// used by matmul. Plain C++: both ISAs consume the same quantized activations,
// so AVX2 and scalar results differ only in float summation order.
#include "kernels/cpu/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/block_levels.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/quant_blocks.hpp"
#include "troupe/check.hpp"

namespace troupe::kernels::cpu {
namespace {

int clampi(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }
int roundi(float v) { return static_cast<int>(std::nearbyint(v)); }
float safe_inv(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// Largest magnitude of x[0..n).
float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// Value with the largest magnitude, sign kept (the "type-0" formats map it to -2^(bits-1)).
float signed_absmax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  return best;
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

void pack_high_bits(const int* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}

// Type-0 32-blocks (Q4_0, Q5_0): x ~= (q - half) * d with q in [0, 2*half).
template <class Block, int kHalf>
void quantize_type0(const float* x, Block* b) {
  const float mx = signed_absmax(x, kQK);
  const float d = mx / -static_cast<float>(kHalf);
  b->d = fp32_to_fp16(d);
  const float id = safe_inv(fp16_to_fp32(b->d));
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = clampi(roundi(x[j] * id) + kHalf, 0, 2 * kHalf - 1);
  pack_nibbles(q, b->qs);
  if constexpr (kHalf == 16) pack_high_bits(q, b->qh);
}

// Type-1 32-blocks (Q4_1, Q5_1): x ~= q * d + m with q in [0, levels].
template <class Block, int kLevels>
void quantize_type1(const float* x, Block* b) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kQK; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  b->d = fp32_to_fp16((hi - lo) / kLevels);
  b->m = fp32_to_fp16(lo);
  const float d = fp16_to_fp32(b->d), m = fp16_to_fp32(b->m);
  const float id = safe_inv(d);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = clampi(roundi((x[j] - m) * id), 0, kLevels);
  pack_nibbles(q, b->qs);
  if constexpr (kLevels == 31) pack_high_bits(q, b->qh);
}

void quantize_q8_0(const float* x, BlockQ8_0* b) {
  b->d = fp32_to_fp16(absmax(x, kQK) / 127.0f);
  const float id = safe_inv(fp16_to_fp32(b->d));
  for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(clampi(roundi(x[j] * id), -128, 127));
}

void quantize_q4_k(const float* x, BlockQ4_K* b) {
  float scale[8], minv[8];  // per sub-block: x ~= scale * q - minv, minv >= 0
  for (int j = 0; j < 8; ++j) {
    const float* s = x + 32 * j;
    float lo = 0.0f, hi = s[0];  // the min is clamped to <= 0 (stored as a positive offset)
    for (int l = 0; l < 32; ++l) lo = std::min(lo, s[l]), hi = std::max(hi, s[l]);
    scale[j] = (hi - lo) / 15.0f;
    minv[j] = -lo;
  }
  const float max_scale = *std::max_element(scale, scale + 8);
  const float max_min = *std::max_element(minv, minv + 8);
  b->d = fp32_to_fp16(max_scale / 63.0f);
  b->dmin = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(b->d), dmin = fp16_to_fp32(b->dmin);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = clampi(roundi(scale[j] * safe_inv(d)), 0, 63);
    m[j] = clampi(roundi(minv[j] * safe_inv(dmin)), 0, 63);
  }
  for (int j = 0; j < 4; ++j) {
    b->scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    b->scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    b->scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
  for (int c = 0; c < 4; ++c) {
    for (int half = 0; half < 2; ++half) {
      const int j = 2 * c + half;
      int scj, mj;
      q4k_scale_min(j, b->scales, &scj, &mj);
      const float dj = d * static_cast<float>(scj), mjf = dmin * static_cast<float>(mj);
      const float id = safe_inv(dj);
      for (int l = 0; l < 32; ++l) {
        const int q = clampi(roundi((x[32 * j + l] + mjf) * id), 0, 15);
        uint8_t& byte = b->qs[32 * c + l];
        byte = half == 0 ? static_cast<uint8_t>((byte & 0xf0) | q) : static_cast<uint8_t>((byte & 0x0f) | (q << 4));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* b) {
  float scale[16];
  float max_abs_scale = 0.0f, max_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    scale[g] = signed_absmax(x + 16 * g, 16) / -32.0f;
    if (std::fabs(scale[g]) > max_abs_scale) max_abs_scale = std::fabs(scale[g]), max_scale = scale[g];
  }
  const float d = max_scale / -127.0f;  // keeps |scales| <= 127
  b->d = fp32_to_fp16(d);
  const float dd = fp16_to_fp32(b->d);
  int q[kQKK];
  for (int g = 0; g < 16; ++g) {
    b->scales[g] = static_cast<int8_t>(clampi(roundi(scale[g] * safe_inv(dd)), -127, 127));
    const float id = safe_inv(dd * b->scales[g]);
    for (int l = 0; l < 16; ++l) q[16 * g + l] = clampi(roundi(x[16 * g + l] * id), -32, 31) + 32;
  }
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int h = 0; h < 2; ++h) {
    const int* qq = q + 128 * h;
    uint8_t* ql = b->ql + 64 * h;
    uint8_t* qh = b->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((qq[l] & 0x0f) | ((qq[l + 64] & 0x0f) << 4));
      ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0x0f) | ((qq[l + 96] & 0x0f) << 4));
      qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                   ((qq[l + 96] >> 4) << 6));
    }
  }
}

// x[0..n) ~= scale * q - minv, q in 0..levels, minv >= 0: the range first, then two
// least-squares refits of (scale, minv) to the levels that range gives.
void fit_scale_min(const float* x, int n, int levels, float* scale, float* minv) {
  float lo = 0.0f, hi = x[0];
  for (int l = 0; l < n; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
  float sc = (hi - lo) / static_cast<float>(levels), off = lo;
  for (int iter = 0; iter < 2 && sc > 0.0f; ++iter) {
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int l = 0; l < n; ++l) {
      const int q = clampi(roundi((x[l] - off) / sc), 0, levels);
      sq += q, sqq += static_cast<double>(q) * q, sx += x[l], sxq += static_cast<double>(x[l]) * q;
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    const double new_sc = (n * sxq - sq * sx) / det;
    const double new_off = (sx - new_sc * sq) / n;
    if (!(new_sc > 0) || new_off > 0) break;  // keep the min at or below zero
    sc = static_cast<float>(new_sc), off = static_cast<float>(new_off);
  }
  *scale = sc;
  *minv = -off;
}

// x[0..n) ~= scale * q, q in -half..half-1 (the largest magnitude maps to -half),
// then two least-squares refits of the scale to the levels it gives.
float fit_scale_signed(const float* x, int n, int half) {
  float sc = signed_absmax(x, n) / -static_cast<float>(half);
  for (int iter = 0; iter < 2 && sc != 0.0f; ++iter) {
    double sxq = 0, sqq = 0;
    for (int l = 0; l < n; ++l) {
      const int q = clampi(roundi(x[l] / sc), -half, half - 1);
      sxq += static_cast<double>(x[l]) * q, sqq += static_cast<double>(q) * q;
    }
    if (sqq <= 0) break;
    sc = static_cast<float>(sxq / sqq);
  }
  return sc;
}

void quantize_q2_k(const float* x, BlockQ2_K* b) {
  float scale[16], minv[16];
  for (int g = 0; g < 16; ++g) fit_scale_min(x + 16 * g, 16, 3, &scale[g], &minv[g]);
  b->d = fp32_to_fp16(*std::max_element(scale, scale + 16) / 15.0f);
  b->dmin = fp32_to_fp16(*std::max_element(minv, minv + 16) / 15.0f);
  const float d = fp16_to_fp32(b->d), dmin = fp16_to_fp32(b->dmin);
  int q[kQKK];
  for (int g = 0; g < 16; ++g) {
    const int sc = clampi(roundi(scale[g] * safe_inv(d)), 0, 15), m = clampi(roundi(minv[g] * safe_inv(dmin)), 0, 15);
    b->scales[g] = static_cast<uint8_t>(sc | (m << 4));
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
    for (int l = 0; l < 16; ++l) q[16 * g + l] = clampi(roundi((x[16 * g + l] + ml) * safe_inv(dl)), 0, 3);
  }
  std::memset(b->qs, 0, sizeof(b->qs));
  for (int e = 0; e < kQKK; ++e) {  // e = 128h + 32j + 16k + l -> bits 2j of qs[32h + 16k + l]
    const int h = e / 128, j = (e / 32) % 4, kl = e % 32;
    b->qs[32 * h + kl] = static_cast<uint8_t>(b->qs[32 * h + kl] | (q[e] << (2 * j)));
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* b) {
  float scale[16];
  float max_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    scale[g] = fit_scale_signed(x + 16 * g, 16, 4);
    if (std::fabs(scale[g]) > std::fabs(max_scale)) max_scale = scale[g];
  }
  b->d = fp32_to_fp16(max_scale / -32.0f);  // the largest group scale maps to -32
  const float d = fp16_to_fp32(b->d);
  int s[16], q[kQKK];
  for (int g = 0; g < 16; ++g) {
    s[g] = clampi(roundi(scale[g] * safe_inv(d)), -32, 31) + 32;
    const float dl = d * static_cast<float>(s[g] - 32);
    for (int l = 0; l < 16; ++l) q[16 * g + l] = clampi(roundi(x[16 * g + l] * safe_inv(dl)), -4, 3);
  }
  std::memset(b->scales, 0, sizeof(b->scales));
  for (int g = 0; g < 16; ++g) {
    b->scales[g % 8] = static_cast<uint8_t>(b->scales[g % 8] | ((s[g] & 0x0f) << (g < 8 ? 0 : 4)));
    b->scales[8 + g % 4] = static_cast<uint8_t>(b->scales[8 + g % 4] | ((s[g] >> 4) << (2 * (g / 4))));
  }
  std::memset(b->qs, 0, sizeof(b->qs));
  std::memset(b->hmask, 0, sizeof(b->hmask));
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, j = (e / 32) % 4, kl = e % 32, u = q[e] + 4;  // u in 0..7
    b->qs[32 * h + kl] = static_cast<uint8_t>(b->qs[32 * h + kl] | ((u & 3) << (2 * j)));
    if (u & 4) b->hmask[kl] = static_cast<uint8_t>(b->hmask[kl] | (1 << (4 * h + j)));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* b) {
  float scale[8], minv[8];
  for (int j = 0; j < 8; ++j) fit_scale_min(x + 32 * j, 32, 31, &scale[j], &minv[j]);
  b->d = fp32_to_fp16(*std::max_element(scale, scale + 8) / 63.0f);
  b->dmin = fp32_to_fp16(*std::max_element(minv, minv + 8) / 63.0f);
  const float d = fp16_to_fp32(b->d), dmin = fp16_to_fp32(b->dmin);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = clampi(roundi(scale[j] * safe_inv(d)), 0, 63);
    m[j] = clampi(roundi(minv[j] * safe_inv(dmin)), 0, 63);
  }
  for (int j = 0; j < 4; ++j) {  // Q4_K's packing
    b->scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    b->scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    b->scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
  std::memset(b->qs, 0, sizeof(b->qs));
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int j = 0; j < 8; ++j) {
    const float dl = d * static_cast<float>(sc[j]), ml = dmin * static_cast<float>(m[j]);
    const int c = j / 2, hi = j % 2;
    for (int l = 0; l < 32; ++l) {
      const int q = clampi(roundi((x[32 * j + l] + ml) * safe_inv(dl)), 0, 31);
      b->qs[32 * c + l] = static_cast<uint8_t>(b->qs[32 * c + l] | ((q & 0x0f) << (4 * hi)));
      b->qh[l] = static_cast<uint8_t>(b->qh[l] | ((q >> 4) << j));
    }
  }
}

// Index of the IQ4 grid value nearest v.
int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(v - kIq4Values[i]) < std::fabs(v - kIq4Values[best])) best = i;
  return best;
}

// A 32-run of IQ4 nibbles for x ~= dl * grid[idx] (dl = 0: all at the grid's value nearest 0).
void pack_iq4(const float* x, float dl, uint8_t* qs) {
  int idx[kQK];
  for (int l = 0; l < kQK; ++l) idx[l] = nearest_iq4(x[l] * safe_inv(dl));
  pack_nibbles(idx, qs);
}

// The IQ4 scale of a 32-run: the largest magnitude maps to -127 (the grid's widest
// level), then two least-squares refits to the grid values that scale gives.
float fit_scale_iq4(const float* x) {
  float sc = signed_absmax(x, kQK) / -127.0f;
  for (int iter = 0; iter < 2 && sc != 0.0f; ++iter) {
    double sxq = 0, sqq = 0;
    for (int l = 0; l < kQK; ++l) {
      const double v = kIq4Values[nearest_iq4(x[l] / sc)];
      sxq += x[l] * v, sqq += v * v;
    }
    sc = static_cast<float>(sxq / sqq);
  }
  return sc;
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* b) {
  b->d = fp32_to_fp16(fit_scale_iq4(x));
  pack_iq4(x, fp16_to_fp32(b->d), b->qs);
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* b) {
  float scale[8];
  float max_scale = 0.0f;
  for (int j = 0; j < 8; ++j) {
    scale[j] = fit_scale_iq4(x + 32 * j);
    if (std::fabs(scale[j]) > std::fabs(max_scale)) max_scale = scale[j];
  }
  b->d = fp32_to_fp16(max_scale / -32.0f);  // the largest sub-block scale maps to -32
  const float d = fp16_to_fp32(b->d);
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof(b->scales_l));
  for (int j = 0; j < 8; ++j) {
    const int ls = clampi(roundi(scale[j] * safe_inv(d)), -32, 31) + 32;
    b->scales_l[j / 2] = static_cast<uint8_t>(b->scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
    b->scales_h = static_cast<uint16_t>(b->scales_h | ((ls >> 4) << (2 * j)));
    pack_iq4(x + 32 * j, d * static_cast<float>(ls - 32), b->qs + 16 * j);
  }
}

// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (the largest value lands
// near the top of the doubled grid, 8..12), then each value's nearest grid point.
void quantize_mxfp4(const float* x, BlockMXFP4* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  b->e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
  const float d = e8m0_half(b->e);
  auto nearest = [d](float v) {
    int best = 0;
    float err = std::fabs(kMxfp4Values[0] * d - v);
    for (int i = 1; i < 16; ++i)
      if (const float e = std::fabs(kMxfp4Values[i] * d - v); e < err) best = i, err = e;
    return best;
  };
  for (int j = 0; j < kQK / 2; ++j)
    b->qs[j] = static_cast<uint8_t>(nearest(x[j]) | nearest(x[j + kQK / 2]) << 4);
}

template <class Block, class Fn>
void for_blocks(const float* src, void* dst, int64_t n, int64_t block, Fn fn) {
  Block* out = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / block; ++i) fn(src + i * block, out + i);
}

}  // namespace

bool supports_type(DType type) {
  if (type == kMxfp4) return true;  // no enumerator to switch on
  switch (type) {
    case DType::f32: case DType::f16: case DType::bf16: case DType::q8_0: case DType::q4_0:
    case DType::q4_1: case DType::q5_0: case DType::q5_1: case DType::q4_k: case DType::q6_k:
    case DType::q2_k: case DType::q3_k: case DType::q5_k: case DType::iq4_nl: case DType::iq4_xs:
      return true;
    default:
      return false;
  }
}

void quantize_row_reference(DType type, const float* src, void* dst, int64_t n) {
  TROUPE_CHECK(supports_type(type), "quantize_row_reference: unsupported type");
  TROUPE_CHECK(row_bytes(type, n) >= 0, "quantize_row_reference: n is not a whole number of blocks");
  if (type == kMxfp4) return for_blocks<BlockMXFP4>(src, dst, n, kQK, quantize_mxfp4);  // no enumerator
  switch (type) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::f16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::bf16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::q4_0: return for_blocks<BlockQ4_0>(src, dst, n, kQK, quantize_type0<BlockQ4_0, 8>);
    case DType::q5_0: return for_blocks<BlockQ5_0>(src, dst, n, kQK, quantize_type0<BlockQ5_0, 16>);
    case DType::q4_1: return for_blocks<BlockQ4_1>(src, dst, n, kQK, quantize_type1<BlockQ4_1, 15>);
    case DType::q5_1: return for_blocks<BlockQ5_1>(src, dst, n, kQK, quantize_type1<BlockQ5_1, 31>);
    case DType::q8_0: return for_blocks<BlockQ8_0>(src, dst, n, kQK, quantize_q8_0);
    case DType::q4_k: return for_blocks<BlockQ4_K>(src, dst, n, kQKK, quantize_q4_k);
    case DType::q6_k: return for_blocks<BlockQ6_K>(src, dst, n, kQKK, quantize_q6_k);
    case DType::q2_k: return for_blocks<BlockQ2_K>(src, dst, n, kQKK, quantize_q2_k);
    case DType::q3_k: return for_blocks<BlockQ3_K>(src, dst, n, kQKK, quantize_q3_k);
    case DType::q5_k: return for_blocks<BlockQ5_K>(src, dst, n, kQKK, quantize_q5_k);
    case DType::iq4_nl: return for_blocks<BlockIQ4_NL>(src, dst, n, kQK, quantize_iq4_nl);
    case DType::iq4_xs: return for_blocks<BlockIQ4_XS>(src, dst, n, kQKK, quantize_iq4_xs);
    default: return;
  }
}

// ---- activations ------------------------------------------------------------

void quantize_act_q16(const float* x, int64_t n, ActQ16* out) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* s = x + b * kQK;
    const float d = absmax(s, kQK) / 32767.0f;
    const float id = safe_inv(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int q = clampi(roundi(s[j] * id), -32767, 32767);
      out[b].qs[j] = static_cast<int16_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

void quantize_act_q8(const float* x, int64_t n, ActQ8* out) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* s = x + b * kQK;
    const float d = absmax(s, kQK) / 127.0f;
    const float id = safe_inv(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int q = clampi(roundi(s[j] * id), -127, 127);
      out[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].sum = sum;
  }
}

void act_group16_q8(const ActQ8* rows, int64_t nb, int n, ActQ8x16* group) {
  for (int64_t b = 0; b < nb; ++b) {
    ActQ8x16& g = group[b];
    for (int t = 0; t < 16; ++t) {
      if (t >= n) {
        g.d[t] = 0.0f;
        g.sum[t] = 0;
        for (auto& q : g.q) q[t] = 0;
        continue;
      }
      const ActQ8& x = rows[t * nb + b];
      g.d[t] = x.d;
      g.sum[t] = x.sum;
      for (int i = 0; i < kQK / 4; ++i) std::memcpy(&g.q[i][t], x.qs + 4 * i, 4);
    }
  }
}

void quantize_act_q8k(const float* x, int64_t n, ActQ8K* out) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* s = x + b * kQKK;
    const float d = absmax(s, kQKK) / 127.0f;
    const float id = safe_inv(d);
    for (int j = 0; j < kQKK; ++j) out[b].qs[j] = static_cast<int8_t>(roundi(s[j] * id));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += out[b].qs[16 * g + l];
      out[b].bsums[g] = static_cast<int16_t>(sum);
    }
    out[b].d = d;
  }
}

void act_group16_q8k(const ActQ8K* rows, int64_t nb, int n, ActQ8Kx16* group) {
  const auto pair = [](int lo, int hi) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
  };
  for (int64_t b = 0; b < nb; ++b) {
    ActQ8Kx16& g = group[b];
    for (int t = 0; t < 16; ++t) {
      if (t >= n) {
        g.d[t] = 0.0f;
        for (auto& p : g.bs) p[t] = 0;
        for (auto& p : g.bs16) p[t] = 0;
        for (auto& q : g.q) q[t] = 0;
        continue;
      }
      const ActQ8K& x = rows[t * nb + b];
      g.d[t] = x.d;
      for (int p = 0; p < 4; ++p)
        g.bs[p][t] = pair(x.bsums[4 * p] + x.bsums[4 * p + 1], x.bsums[4 * p + 2] + x.bsums[4 * p + 3]);
      for (int p = 0; p < 8; ++p) g.bs16[p][t] = pair(x.bsums[2 * p], x.bsums[2 * p + 1]);
      for (int i = 0; i < kQKK / 4; ++i) std::memcpy(&g.q[i][t], x.qs + 4 * i, 4);
    }
  }
}

}  // namespace troupe::kernels::cpu
