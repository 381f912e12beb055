// Dequantize-on-the-fly matmuls. GEMV: one warp per output row, the 32 lanes
// walk the row together (lane l reads element 32k + l, so a warp reads whole
// blocks), each lane keeps one partial sum per token (at most kGemvMaxTokens),
// then a warp shuffle sums them. Tiled GEMM: a 256-thread block computes a
// 64 (rows of W) x 64 (tokens) tile of y, staging 32-wide slices of both
// operands in shared memory as floats; each thread owns 4 x 4 outputs.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/elementwise.hpp"  // supports_weight_type
#include "kernels/cuda/matmul.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr int kGemvThreads = 256;  // 8 warps, one output row each
constexpr int kGemvRowsPerBlock = kGemvThreads / 32;
constexpr int kNt = static_cast<int>(kGemvMaxTokens);

constexpr int kTileM = 64;   // rows of W (outputs) per block
constexpr int kTileN = 64;   // tokens per block
constexpr int kTileK = 32;   // elements of `in` per shared-memory slice
constexpr int kTileThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// Kernels take the type as its GGUF id: nvcc's host stubs cannot name a DType value without
// an enumerator (MXFP4, 39) as a template argument of a __global__ function.
template <uint32_t kType, class XT>
__global__ void __launch_bounds__(kGemvThreads)
gemv_kernel(const uint8_t* w, int64_t w_stride, int64_t in, int64_t out, const XT* x, int nt, float* y) {
  constexpr DType T = static_cast<DType>(kType);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t o = int64_t{blockIdx.x} * kGemvRowsPerBlock + warp;
  if (o >= out) return;  // the whole warp leaves together, so the shuffles below see full warps
  const uint8_t* row = w + o * w_stride;
  float acc[kNt];
#pragma unroll
  for (int t = 0; t < kNt; ++t) acc[t] = 0.0f;
  for (int64_t i = lane; i < in; i += 32) {
    const float wv = detail::dq<T>(row, i);
#pragma unroll
    for (int t = 0; t < kNt; ++t)
      if (t < nt) acc[t] += wv * to_float(x[t * in + i]);
  }
#pragma unroll
  for (int t = 0; t < kNt; ++t) {
    float v = acc[t];
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && t < nt) y[t * out + o] = v;
  }
}

template <uint32_t kType, class XT>
__global__ void __launch_bounds__(kTileThreads)
gemm_tiled_kernel(const uint8_t* w, int64_t w_stride, int64_t in, int64_t out, const XT* x, int64_t n_tokens,
                  float* y) {
  constexpr DType T = static_cast<DType>(kType);
  __shared__ float ws[kTileK][kTileM + 1];  // ws[k][r] = W[o0 + r][k0 + k]
  __shared__ float xs[kTileK][kTileN + 1];  // xs[k][c] = x[t0 + c][k0 + k]
  const int tid = threadIdx.x;
  const int tx = tid % 16;  // output rows o0 + tx + 16 * r: neighbouring threads write neighbouring y
  const int ty = tid / 16;  // tokens t0 + ty + 16 * c
  const int64_t o0 = int64_t{blockIdx.x} * kTileM;
  const int64_t t0 = int64_t{blockIdx.y} * kTileN;
  float acc[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.0f;

  for (int64_t k0 = 0; k0 < in; k0 += kTileK) {
    for (int e = tid; e < kTileM * kTileK; e += kTileThreads) {
      const int r = e / kTileK, k = e % kTileK;
      const int64_t o = o0 + r, i = k0 + k;
      ws[k][r] = (o < out && i < in) ? detail::dq<T>(w + o * w_stride, i) : 0.0f;
    }
    for (int e = tid; e < kTileN * kTileK; e += kTileThreads) {
      const int c = e / kTileK, k = e % kTileK;
      const int64_t t = t0 + c, i = k0 + k;
      xs[k][c] = (t < n_tokens && i < in) ? to_float(x[t * in + i]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTileK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = ws[k][tx + 16 * r];
#pragma unroll
      for (int c = 0; c < 4; ++c) b[c] = xs[k][ty + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];
    }
    __syncthreads();  // the next slice overwrites ws and xs
  }
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t o = o0 + tx + 16 * r, t = t0 + ty + 16 * c;
      if (o < out && t < n_tokens) y[t * out + o] = acc[r][c];
    }
}

struct Problem {
  const uint8_t* w;
  int64_t w_stride, in, out;
  const void* x;
  int64_t n_tokens;
  float* y;
};

template <DType T, class XT>
Status launch(MatmulPath path, const Problem& p, cudaStream_t stream) {
  const XT* x = static_cast<const XT*>(p.x);
  if (path == MatmulPath::gemv) {
    const unsigned blocks = static_cast<unsigned>((p.out + kGemvRowsPerBlock - 1) / kGemvRowsPerBlock);
    for (int64_t t0 = 0; t0 < p.n_tokens; t0 += kGemvMaxTokens) {
      const int nt = static_cast<int>(p.n_tokens - t0 < kGemvMaxTokens ? p.n_tokens - t0 : kGemvMaxTokens);
      gemv_kernel<static_cast<uint32_t>(T), XT><<<blocks, kGemvThreads, 0, stream>>>(p.w, p.w_stride, p.in, p.out, x + t0 * p.in, nt,
                                                               p.y + t0 * p.out);
      TROUPE_RETURN_IF_ERROR(launch_status("cuda matmul: GEMV kernel"));
    }
    return {};
  }
  const dim3 grid(static_cast<unsigned>((p.out + kTileM - 1) / kTileM),
                  static_cast<unsigned>((p.n_tokens + kTileN - 1) / kTileN));
  gemm_tiled_kernel<static_cast<uint32_t>(T), XT><<<grid, kTileThreads, 0, stream>>>(p.w, p.w_stride, p.in, p.out, x, p.n_tokens, p.y);
  return launch_status("cuda matmul: tiled GEMM kernel");
}

template <class XT>
Status dispatch(MatmulPath path, DType type, const Problem& p, cudaStream_t stream) {
  if (type == cpu::kMxfp4) return launch<cpu::kMxfp4, XT>(path, p, stream);  // no enumerator to switch on
  switch (type) {
    case DType::f32: return launch<DType::f32, XT>(path, p, stream);
    case DType::f16: return launch<DType::f16, XT>(path, p, stream);
    case DType::bf16: return launch<DType::bf16, XT>(path, p, stream);
    case DType::q4_0: return launch<DType::q4_0, XT>(path, p, stream);
    case DType::q4_1: return launch<DType::q4_1, XT>(path, p, stream);
    case DType::q5_0: return launch<DType::q5_0, XT>(path, p, stream);
    case DType::q5_1: return launch<DType::q5_1, XT>(path, p, stream);
    case DType::q8_0: return launch<DType::q8_0, XT>(path, p, stream);
    case DType::q4_k: return launch<DType::q4_k, XT>(path, p, stream);
    case DType::q6_k: return launch<DType::q6_k, XT>(path, p, stream);
    case DType::q2_k: return launch<DType::q2_k, XT>(path, p, stream);
    case DType::q3_k: return launch<DType::q3_k, XT>(path, p, stream);
    case DType::q5_k: return launch<DType::q5_k, XT>(path, p, stream);
    case DType::iq4_nl: return launch<DType::iq4_nl, XT>(path, p, stream);
    case DType::iq4_xs: return launch<DType::iq4_xs, XT>(path, p, stream);
    default: return internal_error("cuda matmul: type passed the support check but has no kernel");
  }
}

int64_t element_align(DType type) {
  if (type == DType::f32) return 4;
  if (type == DType::f16 || type == DType::bf16) return 2;
  return 1;  // quantized blocks are read byte by byte
}

}  // namespace

Status matmul_with_path(MatmulPath path, DType w_type, const void* w, int64_t w_row_stride, int64_t in, int64_t out,
                        const void* x, DType x_type, int64_t n_tokens, float* y, cudaStream_t stream) {
  if (!supports_weight_type(w_type))
    return not_supported("cuda matmul: weights of type " + std::string(to_string(w_type)) + " are not supported");
  if (x_type != DType::f32 && x_type != DType::f16)
    return not_supported("cuda matmul: activations of type " + std::string(to_string(x_type)) +
                         " (only f32 and f16)");
  if (in <= 0 || out <= 0 || n_tokens < 0) return invalid_argument("cuda matmul: empty or negative shape");
  const int64_t rb = row_bytes(w_type, in);
  if (rb < 0) return invalid_argument("cuda matmul: `in` is not a whole number of blocks of the weight type");
  if (w_row_stride == 0) w_row_stride = rb;
  if (w_row_stride < rb) return invalid_argument("cuda matmul: the row stride is shorter than a row");
  const int64_t wa = element_align(w_type);
  if (!is_aligned(w, wa) || w_row_stride % wa != 0)
    return invalid_argument("cuda matmul: weights or row stride not aligned to the weight type");
  if (!is_aligned(x, x_type == DType::f32 ? 4 : 2))
    return invalid_argument("cuda matmul: activations not aligned to their type");
  if (n_tokens == 0) return {};
  if (w == nullptr || x == nullptr || y == nullptr) return invalid_argument("cuda matmul: null pointer");
  if ((out + kGemvRowsPerBlock - 1) / kGemvRowsPerBlock > INT32_MAX)
    return invalid_argument("cuda matmul: too many output rows");
  if (path == MatmulPath::tiled && (n_tokens + kTileN - 1) / kTileN > kMaxGridY)
    return invalid_argument("cuda matmul: too many tokens for one tiled GEMM (split the batch)");
  const Problem p{static_cast<const uint8_t*>(w), w_row_stride, in, out, x, n_tokens, y};
  return x_type == DType::f32 ? dispatch<float>(path, w_type, p, stream) : dispatch<__half>(path, w_type, p, stream);
}

Status matmul(DType w_type, const void* w, int64_t w_row_stride, int64_t in, int64_t out, const void* x, DType x_type,
              int64_t n_tokens, float* y, cudaStream_t stream) {
  const MatmulPath path = n_tokens <= kGemvMaxTokens ? MatmulPath::gemv : MatmulPath::tiled;
  return matmul_with_path(path, w_type, w, w_row_stride, in, out, x, x_type, n_tokens, y, stream);
}

}  // namespace troupe::kernels::cuda
