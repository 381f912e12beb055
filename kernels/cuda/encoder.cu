// Encoder kernels: one block per row for LayerNorm (double sums, as on the
// CPU), grid-stride elementwise GELU and bias, and one block per (query row,
// head) for dense attention with the row's scores in shared memory.
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "kernels/cuda/encoder.hpp"
#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {
namespace {

using detail::grid_for;

constexpr int kThreads = 256;

// Sum of v over the block (blockDim.x == kThreads); every thread gets the result.
template <class T>
__device__ T block_sum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}

__device__ float block_max(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

__global__ void layer_norm_kernel(const float* x, const float* weight, const float* bias, int64_t dim, float eps,
                                  float* out) {
  __shared__ double partial[kThreads];
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
  const double mean = block_sum(s, partial) / static_cast<double>(dim);
  double v = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const double d = xr[i] - mean;
    v += d * d;
  }
  const double var = block_sum(v, partial) / static_cast<double>(dim);
  const double inv = 1.0 / sqrt(var + static_cast<double>(eps));
  // Each thread writes only the elements it read: out may alias x.
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = static_cast<float>((xr[i] - mean) * inv) * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
}

__global__ void gelu_kernel(const float* x, int64_t n, float* out) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x)
    out[e] = 0.5f * x[e] * (1.0f + erff(x[e] * kInvSqrt2));
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t n_tokens, int64_t dim) {
  const int64_t total = n_tokens * dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x)
    y[e] += bias[e % dim];
}

// Block (row, head): scores of the row against its sequence's keys in shared memory,
// softmax, then the weighted sum of the values, one output element per thread.
__global__ void dense_attention_kernel(const float* q, const float* k, const float* v, float* out,
                                       const int32_t* seq_starts, int num_seqs, int n_heads, int head_dim,
                                       float scale, bool causal) {
  extern __shared__ float scores[];  // [max_len]
  __shared__ float red[kThreads];
  const int64_t row = blockIdx.x / n_heads;
  const int h = static_cast<int>(blockIdx.x % n_heads);
  const int64_t stride = static_cast<int64_t>(n_heads) * head_dim;
  float* o = out + row * stride + static_cast<int64_t>(h) * head_dim;
  // The sequence holding `row`: the last s with seq_starts[s] <= row.
  int lo = 0, hi = num_seqs - 1, s = -1;
  while (lo <= hi) {
    const int mid = (lo + hi) / 2;
    if (seq_starts[mid] <= row) {
      s = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (s < 0 || row >= seq_starts[s + 1]) {
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) o[d] = 0.0f;
    return;
  }
  const int64_t begin = seq_starts[s];
  const int64_t last = causal ? row + 1 : seq_starts[s + 1];
  const int64_t m = last - begin;
  const float* qi = q + row * stride + static_cast<int64_t>(h) * head_dim;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const float* kj = k + (begin + j) * stride + static_cast<int64_t>(h) * head_dim;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += qi[d] * kj[d];
    scores[j] = dot * scale;
    mx = fmaxf(mx, scores[j]);
  }
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    scores[j] = expf(scores[j] - mx);
    sum += scores[j];
  }
  sum = block_sum(sum, red);  // its barriers also publish every score
  const float inv = 1.0f / sum;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    const float* vd = v + begin * stride + static_cast<int64_t>(h) * head_dim + d;
    for (int64_t j = 0; j < m; ++j) acc += scores[j] * inv * vd[j * stride];
    o[d] = acc;
  }
}

}  // namespace

Status layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                  float* out, cudaStream_t stream) {
  if (n_tokens < 0 || dim <= 0 || n_tokens > INT_MAX) return invalid_argument("cuda layer_norm: bad shape");
  if (n_tokens == 0) return {};
  if (x == nullptr || weight == nullptr || out == nullptr) return invalid_argument("cuda layer_norm: null pointer");
  layer_norm_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(x, weight, bias, dim, eps, out);
  return launch_status("cuda layer_norm kernel");
}

Status gelu_erf(const float* x, int64_t n, float* out, cudaStream_t stream) {
  if (n < 0) return invalid_argument("cuda gelu: negative size");
  if (n == 0) return {};
  if (x == nullptr || out == nullptr) return invalid_argument("cuda gelu: null pointer");
  gelu_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, out);
  return launch_status("cuda gelu kernel");
}

Status add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim, cudaStream_t stream) {
  if (n_tokens < 0 || dim <= 0) return invalid_argument("cuda add_bias: bad shape");
  if (n_tokens == 0) return {};
  if (y == nullptr || bias == nullptr) return invalid_argument("cuda add_bias: null pointer");
  add_bias_kernel<<<grid_for(n_tokens * dim, kThreads), kThreads, 0, stream>>>(y, bias, n_tokens, dim);
  return launch_status("cuda add_bias kernel");
}

Status dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                       int num_seqs, int64_t num_tokens, int n_heads, int head_dim, float scale, bool causal,
                       int64_t max_len, cudaStream_t stream) {
  if (num_seqs < 0 || num_tokens < 0 || n_heads <= 0 || head_dim <= 0 || max_len < 0)
    return invalid_argument("cuda dense_attention: bad shape");
  if (max_len > kDenseAttentionMaxLen)
    return not_supported("cuda dense_attention: a sequence of " + std::to_string(max_len) +
                         " tokens is longer than the kernel's " + std::to_string(kDenseAttentionMaxLen));
  if (num_tokens == 0 || num_seqs == 0) return {};
  if (num_tokens * n_heads > INT_MAX) return invalid_argument("cuda dense_attention: too many (row, head) pairs");
  if (!q || !k || !v || !out || !seq_starts) return invalid_argument("cuda dense_attention: null pointer");
  // At most 32 KiB of scores: within the default 48 KiB of shared memory per block.
  const size_t shared = static_cast<size_t>(max_len > 0 ? max_len : 1) * sizeof(float);
  dense_attention_kernel<<<static_cast<unsigned>(num_tokens * n_heads), kThreads, shared, stream>>>(
      q, k, v, out, seq_starts, num_seqs, n_heads, head_dim, scale, causal);
  return launch_status("cuda dense_attention kernel");
}

}  // namespace troupe::kernels::cuda
