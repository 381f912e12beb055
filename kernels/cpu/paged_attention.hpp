// Paged attention on the CPU: KV stored in fixed-size blocks addressed through
// per-sequence block tables (vLLM's layout), causal attention for a flattened
// batch of sequences (prefill chunks and decodes mixed), threaded over
// (sequence, kv head, query tile). The cache holds f32 or f16 values.
//
// A query row's output depends only on that row, its sequence's cache and the
// ISA: never on the other rows of the batch, the query tile it falls in or the
// thread that runs it (keys are taken in chunks of kKeyChunk from position 0,
// with one fixed order of operations per chunk).
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

class ThreadPool;

/// How the cache stores keys and values.
enum class KvDtype { f32, f16 };

/// Bytes of one cached element.
constexpr int64_t kv_elem_bytes(KvDtype t) { return t == KvDtype::f16 ? 2 : 4; }

/// Write this step's k/v rows ([n_tokens][num_kv_heads][head_dim] f32) to their slots of one
/// layer's cache (slot = block * block_size + offset; layout in PagedAttentionArgs), rounding
/// to nearest even for f16. Slots < 0 (padding) are skipped.
void paged_kv_store(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v,
                    const int64_t* slot_mapping, int64_t n_tokens, int num_kv_heads, int head_dim, int block_size);

struct PagedAttentionArgs {
  const float* q = nullptr;        // [n_tokens][num_heads][head_dim]
  float* out = nullptr;            // like q
  KvDtype kv_dtype = KvDtype::f32;
  // [num_blocks][num_kv_heads][block_size][head_dim] of this layer: a kv head's rows of one
  // block are contiguous, so a work item reads its keys as streams, not every num_kv_heads-th row.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* query_start = nullptr;       // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;          // [num_seqs] tokens in the cache, this step's included
  const int32_t* const* block_tables = nullptr;  // [num_seqs] -> block ids covering seq_lens
  int num_seqs = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;                // at most 256
  int block_size = 16;
  float scale = 1.0f;
  int window = 0;                  // > 0: a query at position p sees keys (p - window, p] only
  float softcap = 0.0f;            // > 0: score = softcap * tanh(score / softcap) after the scale
  /// [num_heads] or nullptr: head h's sink logit (gpt-oss), one more term exp(sink) in the
  /// softmax's denominator that attends to nothing (ggml_soft_max_ext with sinks).
  const float* sinks = nullptr;
  int64_t* work_offsets = nullptr; // caller scratch of num_seqs + 1 entries
};

/// Query token j of sequence s (q_len tokens) sits at position p = seq_len - q_len + j and attends to
/// cache positions [0, p], or [p - window + 1, p] with a window. Key chunks stay aligned to
/// multiples of kKeyChunk from position 0 whatever the window, so a row's result still depends
/// only on that row.
void paged_attention(const PagedAttentionArgs& args, ThreadPool* pool);

}  // namespace troupe::kernels::cpu
