// Reference quantizers (float -> GGUF blocks) and the activation quantizers
// used by matmul. Plain C++: both ISAs consume the same quantized activations,
// so AVX2 and scalar results differ only in float summation order.
#include "kernels/cpu/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

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

template <class Block, class Fn>
void for_blocks(const float* src, void* dst, int64_t n, int64_t block, Fn fn) {
  Block* out = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / block; ++i) fn(src + i * block, out + i);
}

}  // namespace

bool supports_type(DType type) {
  switch (type) {
    case DType::f32: case DType::f16: case DType::bf16: case DType::q8_0: case DType::q4_0:
    case DType::q4_1: case DType::q5_0: case DType::q5_1: case DType::q4_k: case DType::q6_k:
      return true;
    default:
      return false;
  }
}

void quantize_row_reference(DType type, const float* src, void* dst, int64_t n) {
  TROUPE_CHECK(supports_type(type), "quantize_row_reference: unsupported type");
  TROUPE_CHECK(row_bytes(type, n) >= 0, "quantize_row_reference: n is not a whole number of blocks");
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

}  // namespace troupe::kernels::cpu
