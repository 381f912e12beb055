// Elementwise kernels: one thread per element (grid-stride), one block per row
// for RMSNorm. Plain and obviously indexed; speed comes later, if it matters.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {
namespace {

using detail::grid_for;

constexpr int kThreads = 256;

// Kernels take the type as its GGUF id: nvcc's host stubs cannot name a DType value without
// an enumerator (MXFP4, 39) as a template argument of a __global__ function.
template <uint32_t kType>
__global__ void embedding_kernel(const uint8_t* table, int64_t row_stride, int64_t dim, int64_t vocab,
                                 const int32_t* ids, int64_t n, float* out) {
  constexpr DType T = static_cast<DType>(kType);
  const int64_t total = n * dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / dim, i = e % dim;
    const int64_t id = ids[t];
    out[e] = (id >= 0 && id < vocab) ? detail::dq<T>(table + id * row_stride, i) : 0.0f;
  }
}

__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __shared__ double partial[kThreads];
  const int64_t t = blockIdx.x;
  const float* xr = x + t * dim;
  float* o = out + t * dim;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float scale = static_cast<float>(1.0 / sqrt(partial[0] / static_cast<double>(dim) + eps));
  // Each thread reads and writes only its own elements (same stride as above), so out may alias x.
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = xr[i] * scale;
    o[i] = weight != nullptr ? v * weight[i] : v;
  }
}

__global__ void rope_kernel(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                            float theta, bool neox, const float* freq_factors, float mscale) {
  const int half = head_dim / 2;
  const int64_t total = n_tokens * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / half;
    const int i = static_cast<int>(e % half);
    double freq = pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (freq_factors != nullptr) freq /= static_cast<double>(freq_factors[i]);
    const double angle = static_cast<double>(positions[t]) * freq;
    const float cs = static_cast<float>(cos(angle)) * mscale;
    const float sn = static_cast<float>(sin(angle)) * mscale;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * static_cast<int64_t>(head_dim);
      float* a = neox ? v + i : v + 2 * i;
      float* b = neox ? v + i + half : v + 2 * i + 1;
      const float x0 = *a, x1 = *b;
      *a = x0 * cs - x1 * sn;
      *b = x0 * sn + x1 * cs;
    }
  }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] += x[i];
}

__global__ void to_f16_kernel(const float* src, __half* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = __float2half_rn(src[i]);
}

__global__ void to_bf16_kernel(const float* src, __nv_bfloat16* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

template <DType T>
void launch_embedding(const void* table, int64_t row_stride, int64_t dim, int64_t vocab, const int32_t* ids,
                      int64_t n, float* out, cudaStream_t stream) {
  embedding_kernel<static_cast<uint32_t>(T)><<<grid_for(n * dim, kThreads), kThreads, 0, stream>>>(
      static_cast<const uint8_t*>(table), row_stride, dim, vocab, ids, n, out);
}

}  // namespace

bool supports_weight_type(DType type) {
  if (type == cpu::kMxfp4) return true;  // no enumerator to switch on
  switch (type) {
    case DType::f32: case DType::f16: case DType::bf16:
    case DType::q4_0: case DType::q4_1: case DType::q5_0: case DType::q5_1: case DType::q8_0:
    case DType::q2_k: case DType::q3_k: case DType::q4_k: case DType::q5_k: case DType::q6_k:
    case DType::iq4_nl: case DType::iq4_xs:
      return true;
    default:
      return false;
  }
}

Status embedding(DType type, const void* table, int64_t row_stride, int64_t dim, int64_t vocab, const int32_t* ids,
                 int64_t n, float* out, cudaStream_t stream) {
  if (!supports_weight_type(type))
    return not_supported("cuda embedding: weights of type " + std::string(to_string(type)) + " are not supported");
  if (dim <= 0 || vocab <= 0 || n < 0) return invalid_argument("cuda embedding: dim and vocab must be positive");
  const int64_t rb = row_bytes(type, dim);
  if (rb < 0) return invalid_argument("cuda embedding: dim is not a whole number of blocks of the row type");
  if (row_stride == 0) row_stride = rb;
  if (row_stride < rb) return invalid_argument("cuda embedding: the row stride is shorter than a row");
  const int64_t align = type == DType::f32 ? 4 : (type == DType::f16 || type == DType::bf16 ? 2 : 1);
  if (!is_aligned(table, align) || row_stride % align != 0)
    return invalid_argument("cuda embedding: table or row stride not aligned to the element type");
  if (n == 0) return {};
  if (table == nullptr || ids == nullptr || out == nullptr) return invalid_argument("cuda embedding: null pointer");
  if (type == cpu::kMxfp4) {  // no enumerator to switch on
    launch_embedding<cpu::kMxfp4>(table, row_stride, dim, vocab, ids, n, out, stream);
    return launch_status("cuda embedding kernel");
  }
  switch (type) {
    case DType::f32: launch_embedding<DType::f32>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::f16: launch_embedding<DType::f16>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::bf16: launch_embedding<DType::bf16>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q4_0: launch_embedding<DType::q4_0>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q4_1: launch_embedding<DType::q4_1>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q5_0: launch_embedding<DType::q5_0>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q5_1: launch_embedding<DType::q5_1>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q8_0: launch_embedding<DType::q8_0>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q4_k: launch_embedding<DType::q4_k>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q6_k: launch_embedding<DType::q6_k>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q2_k: launch_embedding<DType::q2_k>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q3_k: launch_embedding<DType::q3_k>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::q5_k: launch_embedding<DType::q5_k>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::iq4_nl: launch_embedding<DType::iq4_nl>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    case DType::iq4_xs: launch_embedding<DType::iq4_xs>(table, row_stride, dim, vocab, ids, n, out, stream); break;
    default: return internal_error("cuda embedding: type passed the support check but has no kernel");
  }
  return launch_status("cuda embedding kernel");
}

Status rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out,
                cudaStream_t stream) {
  if (n_tokens < 0 || dim <= 0 || n_tokens > INT_MAX) return invalid_argument("cuda rms_norm: bad shape");
  if (n_tokens == 0) return {};
  if (x == nullptr || out == nullptr) return invalid_argument("cuda rms_norm: null pointer");
  rms_norm_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(x, weight, dim, eps, out);
  return launch_status("cuda rms_norm kernel");
}

Status rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta, bool neox,
            cudaStream_t stream) {
  return rope_freq_factors(x, positions, n_tokens, n_heads, head_dim, theta, neox, nullptr, 1.0f, stream);
}

Status rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                         bool neox, const float* freq_factors, float mscale, cudaStream_t stream) {
  if (n_tokens < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 || head_dim > 1024)
    return invalid_argument("cuda rope: bad shape (head_dim must be even and at most 1024)");
  if (n_tokens == 0) return {};
  if (x == nullptr || positions == nullptr) return invalid_argument("cuda rope: null pointer");
  rope_kernel<<<grid_for(n_tokens * (head_dim / 2), kThreads), kThreads, 0, stream>>>(
      x, positions, n_tokens, n_heads, head_dim, theta, neox, freq_factors, mscale);
  return launch_status("cuda rope kernel");
}

Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda silu_mul: negative size");
  if (n == 0) return {};
  if (gate == nullptr || up == nullptr || out == nullptr) return invalid_argument("cuda silu_mul: null pointer");
  silu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
  return launch_status("cuda silu_mul kernel");
}

Status add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda add_inplace: negative size");
  if (n == 0) return {};
  if (y == nullptr || x == nullptr) return invalid_argument("cuda add_inplace: null pointer");
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  return launch_status("cuda add kernel");
}

Status convert_from_f32(const float* src, DType dst_type, void* dst, int64_t n, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda convert_from_f32: negative size");
  if (n == 0) return {};
  if (src == nullptr || dst == nullptr) return invalid_argument("cuda convert_from_f32: null pointer");
  switch (dst_type) {
    case DType::f32:
      return cuda_status(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                                         stream),
                         "cuda convert_from_f32: cudaMemcpyAsync");
    case DType::f16:
      if (!is_aligned(dst, 2)) return invalid_argument("cuda convert_from_f32: destination not 2-byte aligned");
      to_f16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, static_cast<__half*>(dst), n);
      return launch_status("cuda f32 -> f16 kernel");
    case DType::bf16:
      if (!is_aligned(dst, 2)) return invalid_argument("cuda convert_from_f32: destination not 2-byte aligned");
      to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
      return launch_status("cuda f32 -> bf16 kernel");
    default:
      return not_supported("cuda convert_from_f32: to " + std::string(to_string(dst_type)) +
                           " (only f32, f16, bf16)");
  }
}

}  // namespace troupe::kernels::cuda
