// Paged attention, the KV store and KV block copies.
//
// paged_attention_kernel: one 128-thread block per (query row, head). The
// query sits in shared memory; keys are taken in chunks of 64: each of the 4
// warps scores keys (lanes split head_dim, a shuffle sums), then every thread
// runs the same online-softmax update over the chunk's scores (the same
// chunking as the CPU kernel) and accumulates its own output dimensions
// (d = tid and tid + 128) of the weighted values. Simple, not fast: GQA heads
// re-read their kv head, long decodes are not split across blocks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {
namespace {

using detail::grid_for;

constexpr int kAttnThreads = 128;
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr int kKeyChunk = 64;
constexpr int kDimsPerThread = kMaxHeadDim / kAttnThreads;
static_assert(kMaxHeadDim % kAttnThreads == 0, "every head dimension must have an owner thread");
constexpr int kThreads = 256;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class CT> __device__ __forceinline__ CT from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// The sequence s with query_start[s] <= row < query_start[s + 1], or -1.
__device__ int find_sequence(const int32_t* query_start, int num_seqs, int64_t row) {
  if (num_seqs <= 0 || row < query_start[0]) return -1;
  int lo = 0, hi = num_seqs - 1;  // largest s with query_start[s] <= row
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return row < query_start[lo + 1] ? lo : -1;
}

template <class CT>
__global__ void __launch_bounds__(kAttnThreads) paged_attention_kernel(PagedAttentionParams p) {
  __shared__ float q_sh[kMaxHeadDim];
  __shared__ float score_sh[kKeyChunk];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t row = blockIdx.x / p.num_heads;
  const int head = static_cast<int>(blockIdx.x % p.num_heads);
  const int hd = p.head_dim;
  float* out = p.out + (row * p.num_heads + head) * hd;

  // Every thread computes the same s and n_keys, so the early return is uniform over the block.
  const int s = find_sequence(p.query_start, p.num_seqs, row);
  int64_t n_keys = 0, lo = 0;
  if (s >= 0) {
    const int64_t q_len = p.query_start[s + 1] - p.query_start[s];
    const int64_t j = row - p.query_start[s];
    n_keys = int64_t{p.seq_lens[s]} - q_len + j + 1;
    if (p.window > 0 && n_keys - p.window > 0) lo = n_keys - p.window;  // the sliding window's first key
    const int64_t table_keys = int64_t{p.max_blocks_per_seq} * p.block_size;
    if (n_keys > table_keys) n_keys = table_keys;
  }
  if (n_keys <= 0) {
    for (int d = tid; d < hd; d += kAttnThreads) out[d] = 0.0f;
    return;
  }

  for (int d = tid; d < hd; d += kAttnThreads) q_sh[d] = p.q[(row * p.num_heads + head) * hd + d];
  __syncthreads();

  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int64_t slot_stride = int64_t{p.num_kv_heads} * hd;  // elements per slot
  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  const CT* k_cache = static_cast<const CT*>(p.k_cache);
  const CT* v_cache = static_cast<const CT*>(p.v_cache);

  float acc[kDimsPerThread];
#pragma unroll
  for (int k = 0; k < kDimsPerThread; ++k) acc[k] = 0.0f;
  float m = -INFINITY, sum = 0.0f;

  for (int64_t c0 = lo / kKeyChunk * kKeyChunk; c0 < n_keys; c0 += kKeyChunk) {
    const int cn = static_cast<int>(n_keys - c0 < kKeyChunk ? n_keys - c0 : kKeyChunk);
    for (int i = warp; i < cn; i += kAttnWarps) {
      const int64_t t = c0 + i;
      const int64_t block = table[t / p.block_size];
      float score = -INFINITY;  // a key without a valid block, or before the window, is masked out
      if (t >= lo && block >= 0 && block < p.num_blocks) {  // same for the whole warp
        const CT* kr = k_cache + (block * p.block_size + t % p.block_size) * slot_stride + int64_t{kv_head} * hd;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += q_sh[d] * to_float(kr[d]);
        for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        score = dot * p.scale;
        if (p.softcap > 0.0f) score = p.softcap * tanhf(score / p.softcap);
      }
      if (lane == 0) score_sh[i] = score;
    }
    __syncthreads();

    float cmax = -INFINITY;
    for (int i = 0; i < cn; ++i) cmax = fmaxf(cmax, score_sh[i]);
    if (cmax > m) {
      const float f = expf(m - cmax);  // 0 on the first valid chunk (m = -inf)
      sum *= f;
#pragma unroll
      for (int k = 0; k < kDimsPerThread; ++k) acc[k] *= f;
      m = cmax;
    }
    for (int i = 0; i < cn; ++i) {
      const float score = score_sh[i];
      if (score == -INFINITY) continue;  // masked (never reads a V row without a valid block)
      const float w = expf(score - m);
      sum += w;
      const int64_t t = c0 + i;
      const int64_t block = table[t / p.block_size];
      const CT* vr = v_cache + (block * p.block_size + t % p.block_size) * slot_stride + int64_t{kv_head} * hd;
#pragma unroll
      for (int k = 0; k < kDimsPerThread; ++k) {
        const int d = tid + k * kAttnThreads;
        if (d < hd) acc[k] += w * to_float(vr[d]);
      }
    }
    __syncthreads();  // the next chunk overwrites score_sh
  }

  if (p.sinks != nullptr) sum += expf(p.sinks[head] - m);  // gpt-oss: attends to nothing
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int k = 0; k < kDimsPerThread; ++k) {
    const int d = tid + k * kAttnThreads;
    if (d < hd) out[d] = acc[k] * inv;
  }
}

template <class CT>
__global__ void kv_store_kernel(CT* k_cache, CT* v_cache, const float* k, const float* v, const int64_t* slot_mapping,
                                int64_t n_tokens, int64_t kv_dim, int64_t num_slots) {
  const int64_t total = n_tokens * kv_dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / kv_dim, i = e % kv_dim;
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;  // padding (or a bad slot: never written out of bounds)
    k_cache[slot * kv_dim + i] = from_float<CT>(k[e]);
    v_cache[slot * kv_dim + i] = from_float<CT>(v[e]);
  }
}

// One block per pair (grid-stride over pairs); Word is uint4 when block_bytes
// and the buffer allow 16-byte accesses, else unsigned char.
template <class Word>
__global__ void copy_blocks_kernel(Word* cache, int64_t block_words, int64_t num_blocks, const int64_t* pairs,
                                   int64_t num_pairs) {
  for (int64_t pr = blockIdx.x; pr < num_pairs; pr += gridDim.x) {
    const int64_t src = pairs[2 * pr], dst = pairs[2 * pr + 1];
    if (src < 0 || src >= num_blocks || dst < 0 || dst >= num_blocks || src == dst) continue;
    const Word* from = cache + src * block_words;
    Word* to = cache + dst * block_words;
    for (int64_t w = threadIdx.x; w < block_words; w += blockDim.x) to[w] = from[w];
  }
}

}  // namespace

bool supports_cache_type(DType type) { return type == DType::f32 || type == DType::f16 || type == DType::bf16; }

Status paged_kv_store(void* k_cache, void* v_cache, DType cache_type, const float* k, const float* v,
                      const int64_t* slot_mapping, int64_t n_tokens, int64_t kv_dim, int64_t num_slots,
                      cudaStream_t stream) {
  if (!supports_cache_type(cache_type))
    return not_supported("cuda paged_kv_store: cache type " + std::string(to_string(cache_type)) +
                         " (only f32, f16, bf16)");
  if (n_tokens < 0 || kv_dim <= 0 || num_slots <= 0) return invalid_argument("cuda paged_kv_store: bad shape");
  if (n_tokens == 0) return {};
  if (!k_cache || !v_cache || !k || !v || !slot_mapping) return invalid_argument("cuda paged_kv_store: null pointer");
  const int64_t align = cache_type == DType::f32 ? 4 : 2;
  if (!is_aligned(k_cache, align) || !is_aligned(v_cache, align))
    return invalid_argument("cuda paged_kv_store: caches not aligned to their type");
  const unsigned grid = grid_for(n_tokens * kv_dim, kThreads);
  switch (cache_type) {
    case DType::f32:
      kv_store_kernel<float><<<grid, kThreads, 0, stream>>>(static_cast<float*>(k_cache), static_cast<float*>(v_cache),
                                                            k, v, slot_mapping, n_tokens, kv_dim, num_slots);
      break;
    case DType::f16:
      kv_store_kernel<__half><<<grid, kThreads, 0, stream>>>(static_cast<__half*>(k_cache),
                                                             static_cast<__half*>(v_cache), k, v, slot_mapping,
                                                             n_tokens, kv_dim, num_slots);
      break;
    default:
      kv_store_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(k_cache),
                                                                    static_cast<__nv_bfloat16*>(v_cache), k, v,
                                                                    slot_mapping, n_tokens, kv_dim, num_slots);
      break;
  }
  return launch_status("cuda paged_kv_store kernel");
}

Status paged_attention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (!supports_cache_type(p.cache_type))
    return not_supported("cuda paged_attention: cache type " + std::string(to_string(p.cache_type)) +
                         " (only f32, f16, bf16)");
  if (p.num_tokens < 0 || p.num_seqs < 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 || p.head_dim <= 0 ||
      p.block_size <= 0 || p.max_blocks_per_seq < 0 || p.num_blocks < 0)
    return invalid_argument("cuda paged_attention: bad shape");
  if (p.head_dim > kMaxHeadDim)
    return invalid_argument("cuda paged_attention: head_dim " + std::to_string(p.head_dim) + " exceeds " +
                            std::to_string(kMaxHeadDim));
  if (p.num_heads % p.num_kv_heads != 0)
    return invalid_argument("cuda paged_attention: num_heads must be a multiple of num_kv_heads");
  if (p.num_tokens == 0) return {};
  if (p.num_tokens * p.num_heads > INT_MAX)
    return invalid_argument("cuda paged_attention: too many (token, head) pairs for one launch");
  if (!p.q || !p.out || !p.query_start || (p.num_seqs > 0 && (!p.seq_lens || !p.k_cache || !p.v_cache)) ||
      (p.num_seqs > 0 && p.max_blocks_per_seq > 0 && !p.block_tables))
    return invalid_argument("cuda paged_attention: null pointer");
  const unsigned grid = static_cast<unsigned>(p.num_tokens * p.num_heads);
  switch (p.cache_type) {
    case DType::f32: paged_attention_kernel<float><<<grid, kAttnThreads, 0, stream>>>(p); break;
    case DType::f16: paged_attention_kernel<__half><<<grid, kAttnThreads, 0, stream>>>(p); break;
    default: paged_attention_kernel<__nv_bfloat16><<<grid, kAttnThreads, 0, stream>>>(p); break;
  }
  return launch_status("cuda paged_attention kernel");
}

Status copy_kv_blocks(void* cache, int64_t block_bytes, int64_t num_blocks, const int64_t* pairs, int64_t num_pairs,
                      cudaStream_t stream) {
  if (block_bytes <= 0 || num_blocks < 0 || num_pairs < 0) return invalid_argument("cuda copy_kv_blocks: bad shape");
  if (num_pairs == 0) return {};
  if (cache == nullptr || pairs == nullptr) return invalid_argument("cuda copy_kv_blocks: null pointer");
  const unsigned grid = static_cast<unsigned>(num_pairs < 65536 ? num_pairs : 65536);
  if (block_bytes % 16 == 0 && is_aligned(cache, 16)) {
    copy_blocks_kernel<uint4><<<grid, kThreads, 0, stream>>>(static_cast<uint4*>(cache), block_bytes / 16, num_blocks,
                                                             pairs, num_pairs);
  } else {
    copy_blocks_kernel<unsigned char><<<grid, kThreads, 0, stream>>>(static_cast<unsigned char*>(cache), block_bytes,
                                                                     num_blocks, pairs, num_pairs);
  }
  return launch_status("cuda copy_kv_blocks kernel");
}

}  // namespace troupe::kernels::cuda
