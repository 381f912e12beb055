// Greedy and top-k/top-p sampling.
//
// argmax_rows: one block per row, a strided scan then a tree reduction of
// (value, index) pairs, lower index winning ties.
//
// sample_rows: (1) one block per row turns logits into 64-bit sort keys:
// high word = the float bits of p (non-negative, so bit order is value
// order; dropped tokens get p = 0), low word = ~index, so a descending sort
// orders by p descending, then index ascending, with no reliance on sort
// stability; (2) cub's segmented radix sort sorts each row; (3) one block per
// row walks the sorted keys: count the non-zero ones, cut to top_k, find the
// top_p prefix and then the sampled position with block-wide prefix sums in
// double.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "kernels/cuda/sampling.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kAlign = 256;

int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* logits, int64_t vocab, int32_t* out) {
  __shared__ float best_v[kThreads];
  __shared__ int64_t best_i[kThreads];
  const float* l = logits + int64_t{blockIdx.x} * vocab;
  float bv = -INFINITY;
  int64_t bi = vocab;  // none yet (an all-NaN row ends as index 0 below)
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = l[i];
    if (v > bv || (v == bv && i < bi)) {
      bv = v;
      bi = i;
    }
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float v = best_v[threadIdx.x + stride];
      const int64_t i = best_i[threadIdx.x + stride];
      if (v > best_v[threadIdx.x] || (v == best_v[threadIdx.x] && i < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = v;
        best_i[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(best_i[0] < vocab ? best_i[0] : 0);
}

__device__ __forceinline__ float key_prob(uint64_t key) { return __uint_as_float(static_cast<uint32_t>(key >> 32)); }
__device__ __forceinline__ int32_t key_index(uint64_t key) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key));
}

__global__ void __launch_bounds__(kThreads)
prepare_keys_kernel(const float* logits, int vocab, const SamplingRow* params, uint64_t* keys) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ float max_sh;
  const int64_t r = blockIdx.x;
  const float* l = logits + r * vocab;
  uint64_t* k = keys + r * vocab;
  const SamplingRow prm = params[r];

  float mx = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, l[i]);
  mx = Reduce(temp).Reduce(mx, [](float a, float b) { return fmaxf(a, b); });
  if (threadIdx.x == 0) max_sh = mx;
  __syncthreads();
  mx = max_sh;

  // A temperature so small that 1/T overflows (below ~2.9e-39) would make the maximum's
  // exponent 0 * inf = NaN: it is greedy, as the host samplers treat it.
  const float inv_t = prm.temperature > 0.0f ? 1.0f / prm.temperature : 0.0f;
  const bool greedy = !(prm.temperature > 0.0f) || isinf(inv_t);
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    float p;
    if (greedy) {
      p = l[i] == mx ? 1.0f : 0.0f;
    } else {
      p = expf((l[i] - mx) * inv_t);
      if (!(p >= prm.min_p)) p = 0.0f;  // below min_p, or NaN
    }
    k[i] = (static_cast<uint64_t>(__float_as_uint(p)) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
  }
}

__global__ void offsets_kernel(int rows, int vocab, int* offsets) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r <= rows; r += gridDim.x * blockDim.x) offsets[r] = r * vocab;
}

using Scan = cub::BlockScan<double, kThreads>;
using SumReduce = cub::BlockReduce<double, kThreads>;
struct SelectShared {
  union {
    typename Scan::TempStorage scan;
    typename SumReduce::TempStorage reduce;
  } temp;
  double total;
  int first;
  int count;
};

// Sum of p over sorted keys [0, n), the same value in every thread.
__device__ double block_total(const uint64_t* keys, int n, SelectShared& sh) {
  double part = 0.0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) part += key_prob(keys[j]);
  const double total = SumReduce(sh.temp.reduce).Sum(part);  // valid in thread 0
  if (threadIdx.x == 0) sh.total = total;
  __syncthreads();
  const double result = sh.total;
  __syncthreads();  // sh is reused next
  return result;
}

// The first j < n whose running mass (keys in sorted order) is >= target
// (strict: > target), or -1; the same value in every thread.
__device__ int find_first(const uint64_t* keys, int n, double target, bool strict, SelectShared& sh) {
  double carry = 0.0;
  for (int base = 0; base < n; base += blockDim.x) {
    const int j = base + static_cast<int>(threadIdx.x);
    const double p = j < n ? static_cast<double>(key_prob(keys[j])) : 0.0;
    double inclusive = 0.0, chunk = 0.0;
    Scan(sh.temp.scan).InclusiveSum(p, inclusive, chunk);
    if (threadIdx.x == 0) sh.first = INT_MAX;
    __syncthreads();
    const double cum = carry + inclusive;
    if (j < n && (strict ? cum > target : cum >= target)) atomicMin(&sh.first, j);
    __syncthreads();
    const int first = sh.first;
    __syncthreads();  // before the next chunk resets sh.first and reuses the scan storage
    if (first != INT_MAX) return first;
    carry += chunk;
  }
  return -1;
}

__global__ void __launch_bounds__(kThreads)
select_kernel(const uint64_t* sorted, int vocab, const SamplingRow* params, int32_t* out) {
  __shared__ SelectShared sh;
  const int64_t r = blockIdx.x;
  const uint64_t* keys = sorted + r * vocab;
  const SamplingRow prm = params[r];
  if (threadIdx.x == 0) {  // keys with p > 0 come first: binary search for the first zero
    int lo = 0, hi = vocab;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (key_prob(keys[mid]) > 0.0f) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    sh.count = lo;
  }
  __syncthreads();
  int n = sh.count;
  const bool greedy = !(prm.temperature > 0.0f) || isinf(1.0f / prm.temperature);
  if (greedy || n == 0) {  // the first key is the lowest index of the maximum
    if (threadIdx.x == 0) out[r] = key_index(keys[0]);
    return;
  }
  if (prm.top_k > 0 && prm.top_k < n) n = prm.top_k;
  if (prm.top_p < 1.0f) {
    const double total = block_total(keys, n, sh);
    const int j = find_first(keys, n, static_cast<double>(prm.top_p) * total, false, sh);
    if (j >= 0) n = j + 1;
  }
  const double total = block_total(keys, n, sh);
  int j = find_first(keys, n, prm.u * total, true, sh);
  if (j < 0) j = n - 1;  // u * total rounded onto the full mass
  if (threadIdx.x == 0) out[r] = key_index(keys[j]);
}

struct Layout {
  int64_t keys_in = 0, keys_out = 0, offsets = 0, cub = 0, cub_bytes = 0, total = 0;
};

Result<Layout> layout_for(int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0) return invalid_argument("cuda sampling: rows and vocab must be positive");
  if (!sampling_fits(rows, vocab))
    return invalid_argument("cuda sampling: rows * vocab exceeds INT_MAX (sample such a step on the host)");
  size_t cub_bytes = 0;
  const cudaError_t err = cub::DeviceSegmentedRadixSort::SortKeysDescending(
      static_cast<void*>(nullptr), cub_bytes, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
      static_cast<int>(rows * vocab), static_cast<int>(rows), static_cast<const int*>(nullptr),
      static_cast<const int*>(nullptr));
  TROUPE_RETURN_IF_ERROR(cuda_status(err, "cuda sampling: cub sort workspace query"));
  Layout l;
  const int64_t key_bytes = align_up(rows * vocab * static_cast<int64_t>(sizeof(uint64_t)));
  l.keys_in = 0;
  l.keys_out = key_bytes;
  l.offsets = 2 * key_bytes;
  l.cub = l.offsets + align_up((rows + 1) * static_cast<int64_t>(sizeof(int)));
  l.cub_bytes = static_cast<int64_t>(cub_bytes);
  l.total = l.cub + align_up(l.cub_bytes > 0 ? l.cub_bytes : 1);
  return l;
}

}  // namespace

Status argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows < 0 || vocab <= 0 || vocab > INT_MAX || rows > INT_MAX)
    return invalid_argument("cuda argmax_rows: bad shape");
  if (rows == 0) return {};
  if (logits == nullptr || out == nullptr) return invalid_argument("cuda argmax_rows: null pointer");
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, out);
  return launch_status("cuda argmax kernel");
}

Result<int64_t> sampling_workspace_bytes(int64_t rows, int64_t vocab) {
  auto l = layout_for(rows, vocab);
  if (!l.ok()) return l.status();
  return l->total;
}

Status sample_rows(const float* logits, int64_t rows, int64_t vocab, const SamplingRow* params, int32_t* out,
                   void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  auto l = layout_for(rows, vocab);
  if (!l.ok()) return l.status();
  if (logits == nullptr || params == nullptr || out == nullptr || workspace == nullptr)
    return invalid_argument("cuda sample_rows: null pointer");
  if (workspace_bytes < l->total || !is_aligned(workspace, kAlign))
    return invalid_argument("cuda sample_rows: workspace smaller than sampling_workspace_bytes() (" +
                            std::to_string(l->total) + ") or not 256-byte aligned");
  auto* base = static_cast<uint8_t*>(workspace);
  auto* keys_in = reinterpret_cast<uint64_t*>(base + l->keys_in);
  auto* keys_out = reinterpret_cast<uint64_t*>(base + l->keys_out);
  auto* offsets = reinterpret_cast<int*>(base + l->offsets);
  const int r = static_cast<int>(rows), v = static_cast<int>(vocab);

  prepare_keys_kernel<<<static_cast<unsigned>(r), kThreads, 0, stream>>>(logits, v, params, keys_in);
  TROUPE_RETURN_IF_ERROR(launch_status("cuda sampling: key kernel"));
  offsets_kernel<<<(r + kThreads) / kThreads, kThreads, 0, stream>>>(r, v, offsets);
  TROUPE_RETURN_IF_ERROR(launch_status("cuda sampling: offsets kernel"));
  size_t cub_bytes = static_cast<size_t>(l->cub_bytes);
  TROUPE_RETURN_IF_ERROR(cuda_status(cub::DeviceSegmentedRadixSort::SortKeysDescending(
                                         static_cast<void*>(base + l->cub), cub_bytes, keys_in, keys_out, r * v, r,
                                         offsets, offsets + 1, 0, 64, stream),
                                     "cuda sampling: cub segmented sort"));
  select_kernel<<<static_cast<unsigned>(r), kThreads, 0, stream>>>(keys_out, v, params, out);
  return launch_status("cuda sampling: select kernel");
}

}  // namespace troupe::kernels::cuda
