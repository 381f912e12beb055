// Paged attention on the GPU with the CPU backend's KV layout and semantics
// (kernels/cpu/paged_attention.hpp): per layer, K and V caches of
// [num_blocks * block_size slots][num_kv_heads][head_dim], slot =
// block * block_size + offset, here in f32, f16 or bf16.
#pragma once

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// Cache element types the attention kernels store and read.
bool supports_cache_type(DType type);

/// Write this step's k/v rows (f32 [n_tokens][kv_dim]) to their slots of one
/// layer's caches, converted to cache_type (round to nearest even). A slot < 0
/// (padding) or >= num_slots is skipped.
Status paged_kv_store(void* k_cache, void* v_cache, DType cache_type, const float* k, const float* v,
                      const int64_t* slot_mapping, int64_t n_tokens, int64_t kv_dim, int64_t num_slots,
                      cudaStream_t stream);

/// One layer's attention for a flattened batch of sequences; prefill chunks
/// and decodes mix freely. Query row j of sequence s (q_len = query_start[s+1]
/// - query_start[s] rows) sits at position seq_lens[s] - q_len + j and attends
/// to cache positions [0, that position] (causal; a chunked prefill sees every
/// key cached before it). GQA: head h reads kv head h / (num_heads / num_kv_heads).
/// Device arrays: query_start, seq_lens, block_tables. Keys whose block-table
/// entry is outside [0, num_blocks) are skipped, never read; a row outside every
/// sequence, or with no key, is written as zeros.
struct PagedAttentionParams {
  const float* q = nullptr;             // [num_tokens][num_heads][head_dim]
  float* out = nullptr;                 // like q
  const void* k_cache = nullptr;        // [num_blocks * block_size][num_kv_heads][head_dim] of cache_type
  const void* v_cache = nullptr;
  DType cache_type = DType::f32;
  const int32_t* query_start = nullptr;   // [num_seqs + 1], query_start[num_seqs] == num_tokens
  const int32_t* seq_lens = nullptr;      // [num_seqs] tokens in the cache, this step's included
  const int32_t* block_tables = nullptr;  // [num_seqs][max_blocks_per_seq] block ids
  int max_blocks_per_seq = 0;
  int64_t num_blocks = 0;               // blocks in the cache (bounds for the table entries)
  int num_seqs = 0;
  int64_t num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;                     // at most kMaxHeadDim
  int block_size = 16;
  float scale = 1.0f;
  int window = 0;                       // > 0: position p sees keys (p - window, p] only
  float softcap = 0.0f;                 // > 0: score = softcap * tanh(score / softcap)
  const float* sinks = nullptr;         // [num_heads] device array or null: one more exp(sink) in each denominator
};
constexpr int kMaxHeadDim = 256;

Status paged_attention(const PagedAttentionParams& params, cudaStream_t stream);

/// Copy whole blocks inside one cache buffer (one layer's K or V): for each
/// pair p, block pairs[2p + 1] = block pairs[2p] (block_bytes each). pairs is a
/// device array; a pair with an id outside [0, num_blocks) is skipped. Pairs
/// run in parallel: no destination may be another pair's source.
Status copy_kv_blocks(void* cache, int64_t block_bytes, int64_t num_blocks, const int64_t* pairs, int64_t num_pairs,
                      cudaStream_t stream);

}  // namespace troupe::kernels::cuda
