// The Llama family (Llama 1-3 shapes, SmolLM, TinyLlama...): GQA, RoPE,
// RMSNorm, SwiGLU, tied or separate output, over the platform's Ops and
// AttentionBackend. Activations are preallocated for max_num_batched_tokens.
#pragma once

#include <memory>
#include <vector>

#include "runtime/models/llama_hparams.hpp"
#include "troupe/model.hpp"

namespace troupe::models {

class LlamaModel final : public Model {
 public:
  /// Validates the file against its hyperparameters; never crashes on a malformed one.
  static Result<std::unique_ptr<Model>> create(const ModelSource& source, const ModelContext& context);

  const ModelInfo& info() const override { return info_; }
  Status forward(const ForwardBatch& batch, float* logits) override;
  const LlamaHParams& hparams() const { return hp_; }

 private:
  LlamaModel(LlamaHParams hp, LlamaWeights w, const ModelContext& ctx);
  Status validate(const ForwardBatch& batch) const;

  LlamaHParams hp_;
  LlamaWeights w_;
  ModelContext ctx_;
  ModelInfo info_;
  // Activation buffers, rows of max_num_batched_tokens.
  std::vector<float> x_;     // [T][n_embd] residual stream
  std::vector<float> xn_;    // [T][n_embd] normed input of a sub-layer
  std::vector<float> tmp_;   // [T][n_embd] sub-layer output
  std::vector<float> q_;     // [T][n_head*head_dim]
  std::vector<float> k_;     // [T][n_head_kv*head_dim]
  std::vector<float> v_;     // [T][n_head_kv*head_dim]
  std::vector<float> attn_;  // [T][n_head*head_dim]
  std::vector<float> gate_;  // [T][n_ff]
  std::vector<float> up_;    // [T][n_ff]
};

}  // namespace troupe::models
