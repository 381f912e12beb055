// One rank's share of a Llama model under tensor (TP) and pipeline (PP)
// parallelism, as views into the memory-mapped weights (nothing is copied),
// then placed in the platform's device memory (place_llama_shard).
//
// PP: layers are split into contiguous stages, as even as possible (earlier
// stages take one more when they do not divide). TP, Megatron-style as vLLM:
// q/k/v are column-parallel by heads (a rank owns rows [heads of rank r] of
// each matrix), attn_output is row-parallel (a rank reads the columns of its
// heads, its partial sums are all-reduced), ffn_gate/ffn_up are
// column-parallel by rows of n_ff and ffn_down row-parallel by the same
// columns. token_embd and the output head are vocab-parallel: a rank owns a
// contiguous slice of the vocabulary rows. A row slice of a GGUF matrix is
// contiguous; a column slice keeps the matrix's row stride and must start and
// end on a block boundary of a quantized type.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/rank/models/llama_hparams.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

/// [begin, end) of part `part` of `n` items split into `parts` contiguous pieces as evenly as
/// possible, the first n % parts pieces one larger.
std::pair<int64_t, int64_t> even_split(int64_t n, int part, int parts);

/// Rows [r0, r1) of `t`: contiguous, so the view is a pointer and a row count.
WeightTensor row_slice(const WeightTensor& t, int64_t r0, int64_t r1);
/// Elements [e0, e1) of an f32 vector (a bias); an absent tensor (nullptr) stays absent.
WeightTensor element_slice(const WeightTensor* t, int64_t e0, int64_t e1);
/// Columns [c0, c1) of every row of `t`: the rows keep the full row as their stride, and the
/// slice must fall on whole blocks of a quantized type (else invalid_argument naming the
/// tensor, the rank and the block size).
Result<WeightTensor> column_slice(const WeightTensor& t, int64_t c0, int64_t c1, int tp_rank, int tp_size);

/// vLLM's checks of a split, before any weight is read: heads and kv heads divisible by
/// tp_size, at least one layer per pipeline stage. invalid_argument with vLLM's wording.
Status check_llama_parallel(const LlamaHParams& hp, int tp_size, int pp_size);

struct LlamaShardLayer {
  WeightTensor attn_norm;  // {n_embd} f32, whole
  WeightTensor ffn_norm;   // {n_embd} f32, whole
  WeightTensor wq;        // {n_embd, n_head_local*head_dim}: rows of this rank's heads
  WeightTensor wk;        // {n_embd, n_head_kv_local*head_dim}
  WeightTensor wv;        // {n_embd, n_head_kv_local*head_dim}
  WeightTensor wo;        // {n_head_local*head_dim, n_embd}: columns of this rank's heads
  WeightTensor ffn_gate;  // {n_embd, ff_end-ff_begin}
  WeightTensor ffn_up;    // {n_embd, ff_end-ff_begin}
  WeightTensor ffn_down;  // {ff_end-ff_begin, n_embd}: columns [ff_begin, ff_end)
  WeightTensor bq, bk, bv;        // the biases of this rank's heads (data null: none)
  WeightTensor q_norm, k_norm;    // {head_dim} f32, whole (data null: none); olmoe: the whole projection's
  WeightTensor bo;                // attn_output's bias {n_embd}, on tensor rank 0 only (data null: none)
  /// The sink logits of this rank's heads {n_head_local} (gpt-oss), host memory: attention
  /// parameters are host arrays (data null: none). Never placed on a device.
  WeightTensor sinks;
};

struct LlamaShard {
  int tp_rank = 0, tp_size = 1, pp_rank = 0, pp_size = 1;
  int layer_begin = 0, layer_end = 0;    // this stage's layers
  int n_head_local = 0, n_head_kv_local = 0;
  int64_t ff_begin = 0, ff_end = 0;      // this rank's rows of n_ff (dense models)
  int64_t vocab_begin = 0, vocab_end = 0;// this rank's vocabulary rows
  int64_t vocab_max = 0;                 // the largest slice of any rank (gathers are padded to it)
  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp_size - 1; }
  WeightTensor token_embd;               // {n_embd, vocab slice}; first stage only
  WeightTensor output;                   // {n_embd, vocab slice}; last stage only
  WeightTensor output_norm;              // {n_embd} f32; last stage only
  std::vector<LlamaShardLayer> layers;   // layer_end - layer_begin
};

/// Views of rank (tp_rank, pp_rank)'s share of `w`. With tp_size = pp_size = 1 every view is
/// the whole tensor. A column slice that does not fall on block boundaries is an
/// invalid_argument naming the tensor and the block size.
Result<LlamaShard> shard_llama_weights(const LlamaHParams& hp, const LlamaWeights& w, int tp_rank, int tp_size,
                                       int pp_rank, int pp_size);

/// Replaces every view of `shard` by its place in `weights`' device memory: the same
/// views on a host-addressable allocator, packed device copies otherwise.
Status place_llama_shard(LlamaShard& shard, DeviceWeights& weights);

}  // namespace troupe::models
