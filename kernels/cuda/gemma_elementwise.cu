// Gemma's elementwise kernels: one thread per element (grid-stride).
#include <cuda_runtime.h>

#include "kernels/cuda/gemma_elementwise.hpp"
#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {
namespace {

using detail::grid_for;

constexpr int kThreads = 256;

__global__ void gelu_tanh_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x))) * up[i];
  }
}

__global__ void gelu_tanh_kernel(const float* x, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * v * (1.0f + 0.044715f * v * v)));
  }
}

__global__ void softcap_kernel(float* x, int64_t n, float cap, float inv) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = cap * tanhf(x[i] * inv);
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= factor;
}

}  // namespace

Status gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda gelu_tanh_mul: negative size");
  if (n == 0) return {};
  if (gate == nullptr || up == nullptr || out == nullptr) return invalid_argument("cuda gelu_tanh_mul: null pointer");
  gelu_tanh_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
  return launch_status("cuda gelu_tanh_mul kernel");
}

Status gelu_tanh(const float* x, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda gelu_tanh: negative size");
  if (n == 0) return {};
  if (x == nullptr || out == nullptr) return invalid_argument("cuda gelu_tanh: null pointer");
  gelu_tanh_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, out);
  return launch_status("cuda gelu_tanh kernel");
}

Status softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n < 0 || !(cap > 0.0f)) return invalid_argument("cuda softcap: negative size or cap not positive");
  if (n == 0) return {};
  if (x == nullptr) return invalid_argument("cuda softcap: null pointer");
  softcap_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, cap, 1.0f / cap);
  return launch_status("cuda softcap kernel");
}

Status scale(float* x, int64_t n, float factor, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda scale: negative size");
  if (n == 0) return {};
  if (x == nullptr) return invalid_argument("cuda scale: null pointer");
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, factor);
  return launch_status("cuda scale kernel");
}

}  // namespace troupe::kernels::cuda
