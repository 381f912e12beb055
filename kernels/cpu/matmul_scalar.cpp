// Portable matmul kernels. Same arithmetic as the AVX2 ones (integer block dot
// products on the shared quantized activations, then float scaling): for the
// 32-element block types and the K-quants the results are bit-identical
// (matmul_impl.hpp); float weights differ only in float summation order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/block_levels.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/matmul_impl.hpp"

namespace troupe::kernels::cpu {
namespace {

// One weight row unpacked to integers once, then dotted with every token.
struct Row {
  std::vector<int8_t> q;   // per element: signed value for type-0, raw unsigned level for type-1/K
  std::vector<float> d;    // per block scale
  std::vector<float> m;    // per block min (type-1) / dmin (Q4_K)
  std::vector<int> sc;     // K-quants: per sub-block integer scales
  std::vector<int> mn;     // Q4_K: per sub-block integer mins
};

inline int nib(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }
inline int bit5(const uint8_t* qh, int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1u) << 4;
}

void unpack_row(DType type, const uint8_t* w, int64_t in, Row* r) {
  r->q.resize(static_cast<size_t>(in));
  const int64_t nb = type == DType::q4_k || type == DType::q6_k ? in / kQKK : in / kQK;
  r->d.resize(static_cast<size_t>(nb));
  r->m.assign(static_cast<size_t>(nb), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* q = r->q.data() + b * (type == DType::q4_k || type == DType::q6_k ? kQKK : kQK);
    if (type == kMxfp4) {  // no enumerator to switch on
      const auto& blk = reinterpret_cast<const BlockMXFP4*>(w)[b];
      r->d[b] = e8m0_half(blk.e);
      mxfp4_levels32(blk.qs, q);
      continue;
    }
    switch (type) {
      case DType::q4_0: {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>(nib(blk.qs, j) - 8);
        break;
      }
      case DType::q4_1: {
        const auto& blk = reinterpret_cast<const BlockQ4_1*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        r->m[b] = fp16_to_fp32(blk.m);
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>(nib(blk.qs, j));
        break;
      }
      case DType::q5_0: {
        const auto& blk = reinterpret_cast<const BlockQ5_0*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>((nib(blk.qs, j) | bit5(blk.qh, j)) - 16);
        break;
      }
      case DType::q5_1: {
        const auto& blk = reinterpret_cast<const BlockQ5_1*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        r->m[b] = fp16_to_fp32(blk.m);
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>(nib(blk.qs, j) | bit5(blk.qh, j));
        break;
      }
      case DType::iq4_nl: {
        const auto& blk = reinterpret_cast<const BlockIQ4_NL*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        iq4_levels32(blk.qs, q);
        break;
      }
      case DType::q8_0: {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        std::memcpy(q, blk.qs, kQK);
        break;
      }
      case DType::q4_k: {
        const auto& blk = reinterpret_cast<const BlockQ4_K*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        r->m[b] = fp16_to_fp32(blk.dmin);
        r->sc.resize(static_cast<size_t>(nb * 8));
        r->mn.resize(static_cast<size_t>(nb * 8));
        for (int j = 0; j < 8; ++j) q4k_scale_min(j, blk.scales, &r->sc[b * 8 + j], &r->mn[b * 8 + j]);
        for (int c = 0; c < 4; ++c)
          for (int l = 0; l < 32; ++l) {
            q[64 * c + l] = static_cast<int8_t>(blk.qs[32 * c + l] & 0x0f);
            q[64 * c + 32 + l] = static_cast<int8_t>(blk.qs[32 * c + l] >> 4);
          }
        break;
      }
      case DType::q6_k: {
        const auto& blk = reinterpret_cast<const BlockQ6_K*>(w)[b];
        r->d[b] = fp16_to_fp32(blk.d);
        r->sc.resize(static_cast<size_t>(nb * 16));
        for (int g = 0; g < 16; ++g) r->sc[b * 16 + g] = blk.scales[g];
        for (int h = 0; h < 2; ++h) {
          const uint8_t* ql = blk.ql + 64 * h;
          const uint8_t* qh = blk.qh + 32 * h;
          int8_t* qq = q + 128 * h;
          for (int l = 0; l < 32; ++l) {  // raw levels 0..63; the -32 is applied via bsums
            qq[l] = static_cast<int8_t>((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
            qq[l + 32] = static_cast<int8_t>((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
            qq[l + 64] = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            qq[l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
          }
        }
        break;
      }
      default:
        break;
    }
  }
}

float dot_q8(DType type, const Row& r, const ActQ16* x, int64_t nb) {
  const bool has_min = type == DType::q4_1 || type == DType::q5_1;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q = r.q.data() + b * kQK;
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += q[j] * x[b].qs[j];
    // The arithmetic every ISA shares (matmul_impl.hpp): bit-identical to the AVX2 kernels.
    acc = std::fma(static_cast<float>(isum), r.d[b] * x[b].d, acc);
    if (has_min) acc = std::fma(r.m[b], x[b].s, acc);
  }
  return acc;
}

// Q4_0, Q5_0, IQ4_NL and MXFP4 against 8-bit activations: the same steps as dot_q8.
float dot_q8_32(const Row& r, const ActQ8* x, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q = r.q.data() + b * kQK;
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += q[j] * x[b].qs[j];
    acc = std::fma(static_cast<float>(isum), r.d[b] * x[b].d, acc);
  }
  return acc;
}

float dot_q8k(DType type, const Row& r, const ActQ8K* x, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q = r.q.data() + b * kQKK;
    if (type == DType::q4_k) {
      int isum = 0, msum = 0;
      for (int j = 0; j < 8; ++j) {
        int s = 0;
        for (int l = 0; l < 32; ++l) s += q[32 * j + l] * x[b].qs[32 * j + l];
        isum += r.sc[b * 8 + j] * s;
        msum += r.mn[b * 8 + j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
      }
      // The step every ISA shares (matmul_impl.hpp): bit-identical to the AVX2 kernels.
      acc += std::fma(static_cast<float>(isum), r.d[b] * x[b].d, -(static_cast<float>(msum) * (r.m[b] * x[b].d)));
    } else {  // q6_k
      int isum = 0;
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += q[16 * g + l] * x[b].qs[16 * g + l];
        isum += r.sc[b * 16 + g] * (s - 32 * x[b].bsums[g]);
      }
      acc = std::fma(static_cast<float>(isum), r.d[b] * x[b].d, acc);
    }
  }
  return acc;
}

void range_quant(const MatmulArgs& a, int64_t o0, int64_t o1) {
  Row row;
  const ActFormat fmt = act_format(a.type);
  const bool k = fmt == ActFormat::q8k;
  const int64_t nb = a.in / (k ? kQKK : kQK);
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokenChunk) {
    const int64_t t1 = std::min(a.n_tokens, t0 + kTokenChunk);
    for (int64_t o = o0; o < o1; ++o) {
      unpack_row(a.type, a.w + o * a.w_row_stride, a.in, &row);
      for (int64_t t = t0; t < t1; ++t) {
        const uint8_t* xr = a.xq + t * a.xq_row_bytes;
        a.y[t * a.out + o] = k ? dot_q8k(a.type, row, reinterpret_cast<const ActQ8K*>(xr), nb)
                             : fmt == ActFormat::q8_32 ? dot_q8_32(row, reinterpret_cast<const ActQ8*>(xr), nb)
                                                       : dot_q8(a.type, row, reinterpret_cast<const ActQ16*>(xr), nb);
      }
    }
  }
}

// Q2_K, Q3_K, Q5_K and IQ4_XS (matmul_impl.hpp's "group-scaled K-quants"): one row
// as signed levels, integer group scales and mins, then exact integer sums per
// super-block and the two fma steps every ISA shares.
struct KRow {
  std::vector<int8_t> q;  // level per element
  std::vector<int> sc;    // per group: signed integer scale
  std::vector<int> mn;    // per group: integer min (Q2_K, Q5_K)
  std::vector<float> d, dmin;
  int group = 16;         // elements per group
  bool has_min = false;
};

void unpack_krow(DType type, const uint8_t* w, int64_t in, KRow* r) {
  const int64_t nb = in / kQKK;
  r->group = type == DType::q5_k || type == DType::iq4_xs ? 32 : 16;
  r->has_min = type == DType::q2_k || type == DType::q5_k;
  const int groups = kQKK / r->group;
  r->q.resize(static_cast<size_t>(in));
  r->sc.resize(static_cast<size_t>(nb * groups));
  r->mn.assign(static_cast<size_t>(nb * groups), 0);
  r->d.resize(static_cast<size_t>(nb));
  r->dmin.assign(static_cast<size_t>(nb), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* q = r->q.data() + b * kQKK;
    int* sc = r->sc.data() + b * groups;
    int* mn = r->mn.data() + b * groups;
    switch (type) {
      case DType::q2_k: {
        const auto& blk = reinterpret_cast<const BlockQ2_K*>(w)[b];
        q2k_levels(blk, q);
        for (int g = 0; g < 16; ++g) sc[g] = blk.scales[g] & 0x0f, mn[g] = blk.scales[g] >> 4;
        r->d[b] = fp16_to_fp32(blk.d);
        r->dmin[b] = fp16_to_fp32(blk.dmin);
        break;
      }
      case DType::q3_k: {
        const auto& blk = reinterpret_cast<const BlockQ3_K*>(w)[b];
        q3k_levels(blk, q);
        for (int g = 0; g < 16; ++g) sc[g] = q3k_scale(g, blk.scales) - 32;
        r->d[b] = fp16_to_fp32(blk.d);
        break;
      }
      case DType::q5_k: {
        const auto& blk = reinterpret_cast<const BlockQ5_K*>(w)[b];
        q5k_levels(blk, q);
        for (int j = 0; j < 8; ++j) q4k_scale_min(j, blk.scales, &sc[j], &mn[j]);
        r->d[b] = fp16_to_fp32(blk.d);
        r->dmin[b] = fp16_to_fp32(blk.dmin);
        break;
      }
      default: {  // iq4_xs
        const auto& blk = reinterpret_cast<const BlockIQ4_XS*>(w)[b];
        iq4xs_levels(blk, q);
        for (int j = 0; j < 8; ++j) sc[j] = iq4xs_scale(j, blk) - 32;
        r->d[b] = fp16_to_fp32(blk.d);
        break;
      }
    }
  }
}

float dot_krow(const KRow& r, const ActQ8K* x, int64_t nb) {
  const int groups = kQKK / r.group, halves = r.group / 16;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* q = r.q.data() + b * kQKK;
    int isum = 0, msum = 0;
    for (int g = 0; g < groups; ++g) {
      int s = 0;
      for (int l = 0; l < r.group; ++l) s += q[r.group * g + l] * x[b].qs[r.group * g + l];
      isum += r.sc[b * groups + g] * s;
      int bs = 0;
      for (int h = 0; h < halves; ++h) bs += x[b].bsums[halves * g + h];
      msum += r.mn[b * groups + g] * bs;
    }
    acc = std::fma(static_cast<float>(isum), r.d[b] * x[b].d, acc);
    if (r.has_min) acc = std::fma(-static_cast<float>(msum), r.dmin[b] * x[b].d, acc);
  }
  return acc;
}

void range_kx(const MatmulArgs& a, int64_t o0, int64_t o1) {
  KRow row;
  const int64_t nb = a.in / kQKK;
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokenChunk) {
    const int64_t t1 = std::min(a.n_tokens, t0 + kTokenChunk);
    for (int64_t o = o0; o < o1; ++o) {
      unpack_krow(a.type, a.w + o * a.w_row_stride, a.in, &row);
      for (int64_t t = t0; t < t1; ++t)
        a.y[t * a.out + o] = dot_krow(row, reinterpret_cast<const ActQ8K*>(a.xq + t * a.xq_row_bytes), nb);
    }
  }
}

template <DType kType>
float load_w(const uint8_t* w, int64_t i) {
  if constexpr (kType == DType::f32) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return kType == DType::f16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
  }
}

template <DType kType>
void range_float(const MatmulArgs& a, int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* w = a.w + o * a.w_row_stride;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* x = a.xf + t * a.in;
      float acc = 0.0f;
      for (int64_t i = 0; i < a.in; ++i) acc += load_w<kType>(w, i) * x[i];
      a.y[t * a.out + o] = acc;
    }
  }
}

}  // namespace

MatmulRangeFn matmul_kernel_scalar(DType type) {
  if (type == kMxfp4) return range_quant;  // no enumerator to switch on
  switch (type) {
    case DType::f32: return range_float<DType::f32>;
    case DType::f16: return range_float<DType::f16>;
    case DType::bf16: return range_float<DType::bf16>;
    case DType::q4_0: case DType::q4_1: case DType::q5_0: case DType::q5_1: case DType::q8_0:
    case DType::iq4_nl: case DType::q4_k: case DType::q6_k:
      return range_quant;
    case DType::q2_k: case DType::q3_k: case DType::q5_k: case DType::iq4_xs:
      return range_kx;
    default:
      return nullptr;
  }
}

}  // namespace troupe::kernels::cpu
