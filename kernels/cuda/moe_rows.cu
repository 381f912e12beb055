// The mixture-of-experts row kernels: grid-stride loops, one thread per element
// (gather, the activation) or per column (scatter: the rows in order).
#include <cuda_runtime.h>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/moe_rows.hpp"

namespace troupe::kernels::cuda {
namespace {

using detail::grid_for;

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
  const int64_t total = n * row_len;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x)
    dst[e] = src[int64_t{rows[e / row_len]} * row_len + e % row_len];
}

__global__ void scatter_add_rows_kernel(const float* src, int64_t row_len, const int32_t* rows, const float* weights,
                                        int64_t n, float* dst) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < row_len; j += int64_t{gridDim.x} * blockDim.x)
    for (int64_t i = 0; i < n; ++i) dst[int64_t{rows[i]} * row_len + j] += weights[i] * src[i * row_len + j];
}

__global__ void swiglu_oai_kernel(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = fminf(gate[i], limit);
    const float u = fminf(fmaxf(up[i], -limit), limit);
    out[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
  }
}

}  // namespace

Status gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream) {
  if (row_len <= 0 || n < 0) return invalid_argument("cuda gather_rows: bad shape");
  if (n == 0) return {};
  if (src == nullptr || rows == nullptr || dst == nullptr) return invalid_argument("cuda gather_rows: null pointer");
  gather_rows_kernel<<<grid_for(n * row_len, kThreads), kThreads, 0, stream>>>(src, row_len, rows, n, dst);
  return launch_status("cuda gather_rows kernel");
}

Status scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                        float* dst, cudaStream_t stream) {
  if (row_len <= 0 || n < 0) return invalid_argument("cuda scatter_add_rows: bad shape");
  if (n == 0) return {};
  if (src == nullptr || rows == nullptr || weights == nullptr || dst == nullptr)
    return invalid_argument("cuda scatter_add_rows: null pointer");
  scatter_add_rows_kernel<<<grid_for(row_len, kThreads), kThreads, 0, stream>>>(src, row_len, rows, weights, n, dst);
  return launch_status("cuda scatter_add_rows kernel");
}

Status swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out,
                  cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda swiglu_oai: negative size");
  if (n == 0) return {};
  if (gate == nullptr || up == nullptr || out == nullptr) return invalid_argument("cuda swiglu_oai: null pointer");
  swiglu_oai_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, alpha, limit, out);
  return launch_status("cuda swiglu_oai kernel");
}

}  // namespace troupe::kernels::cuda
