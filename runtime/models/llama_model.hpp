// The Llama family (Llama 1-3 shapes, SmolLM, TinyLlama...): GQA, RoPE,
// RMSNorm, SwiGLU, tied or separate output, over the platform's Ops and
// AttentionBackend. Activations are preallocated for max_num_batched_tokens.
// Split over ranks by ModelContext (tp/pp rank and size): each rank runs its
// share (llama_shard.hpp) and the communicators join the shares.
#pragma once

#include <memory>
#include <vector>

#include "runtime/models/llama_hparams.hpp"
#include "runtime/models/llama_shard.hpp"
#include "troupe/model.hpp"

namespace troupe::models {

class LlamaModel final : public Model {
 public:
  /// Validates the file against its hyperparameters; never crashes on a malformed one.
  static Result<std::unique_ptr<Model>> create(const ModelSource& source, const ModelContext& context);

  /// The whole model's shapes (what the engine plans with), whatever this rank's share.
  const ModelInfo& info() const override { return info_; }
  /// This rank's stage's layers and its kv heads.
  KvCacheShape kv_cache_shape() const override;
  Status forward(const ForwardBatch& batch, float* logits) override;
  /// The final norm's output of every token (last-token pooling over a decoder).
  Status forward_hidden(const ForwardBatch& batch, float* hidden) override;
  const LlamaHParams& hparams() const { return hp_; }
  const LlamaShard& shard() const { return shard_; }

 private:
  LlamaModel(LlamaHParams hp, LlamaWeights w, LlamaShard shard, const ModelContext& ctx);
  Status validate(const ForwardBatch& batch) const;
  Status run_layers(const ForwardBatch& batch);
  Status embed(const ForwardBatch& batch);
  Status output(const ForwardBatch& batch, float* logits);
  int global_rank(int pp_rank, int tp_rank) const { return pp_rank * shard_.tp_size + tp_rank; }

  LlamaHParams hp_;
  LlamaWeights w_;   // the whole file's tensors, checked
  LlamaShard shard_; // views of this rank's share of them
  ModelContext ctx_;
  ModelInfo info_;
  // Activation buffers, rows of max_num_batched_tokens; "local" = this tensor rank's share.
  std::vector<float> x_;     // [T][n_embd] residual stream (the same on every rank of a stage)
  std::vector<float> xn_;    // [T][n_embd] normed input of a sub-layer
  std::vector<float> tmp_;   // [T][n_embd] sub-layer output (a partial sum before its all_reduce)
  std::vector<float> q_;     // [T][n_head_local*head_dim]
  std::vector<float> k_;     // [T][n_head_kv_local*head_dim]
  std::vector<float> v_;     // [T][n_head_kv_local*head_dim]
  std::vector<float> attn_;  // [T][n_head_local*head_dim]
  std::vector<float> gate_;  // [T][ff_local]
  std::vector<float> up_;    // [T][ff_local]
  // Output head under parallelism, grown to the rows a step asks for.
  std::vector<float> vocab_part_;  // [R][vocab_max]: this rank's vocabulary slice of the logits
  std::vector<float> gathered_;    // [tp][R][vocab_max]: every slice, at tensor rank 0
  std::vector<float> logits_buf_;  // [R][n_vocab]: the last stage's logits when it is not rank 0
};

}  // namespace troupe::models
