// Gemma 2 and Gemma 3 (llama.cpp's "gemma2" / "gemma3" GGUF architectures) over the
// platform's Ops and AttentionBackend: embeddings scaled by sqrt(n_embd), RMS norms
// before and after attention and the MLP (the GGUF norm weights already hold 1 + w),
// GELU-tanh gating, alternating sliding-window (local) and global layers, queries
// scaled before attention; gemma2 soft-caps attention and final logits, gemma3 norms
// each head's q and k and gives its local layers their own RoPE base.
// One rank only (no tensor/pipeline split) and no LoRA.
#pragma once

#include <memory>
#include <vector>

#include "runtime/rank/models/gemma_hparams.hpp"
#include "troupe/attention.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"
#include "troupe/named_ops/named_ops.hpp"

namespace troupe::models {

class GemmaModel final : public Model {
 public:
  /// Validates the file; refuses a split over ranks and ops without Gemma's named ops.
  static Result<std::unique_ptr<Model>> create(const ModelSource& source, const ModelContext& context);

  const ModelInfo& info() const override { return info_; }
  KvCacheShape kv_cache_shape() const override { return {hp_.n_layer, hp_.n_head_kv, hp_.head_dim}; }
  Status forward(const ForwardBatch& batch, float* logits) override;
  const GemmaHParams& hparams() const { return hp_; }

 private:
  struct Layer {  // the layer's weights in device memory
    WeightTensor attn_norm, wq, wk, wv, wo, q_norm, k_norm, post_attn_norm, ffn_norm, ffn_gate, ffn_up, ffn_down,
        post_ffn_norm;
  };
  GemmaModel(GemmaHParams hp, const ModelContext& ctx);
  Status place(const GemmaWeights& w);
  Status allocate_activations();
  Status validate(const ForwardBatch& batch) const;
  void run_layer(const ForwardBatch& batch, int l);

  GemmaHParams hp_;
  ModelContext ctx_;
  DeviceWeights weights_;
  WeightTensor token_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  ModelInfo info_;
  // Attention of the global and of the sliding-window layers (scale, soft-cap, window).
  AttentionParams global_attn_, local_attn_;
  named_ops::GeluTanhMul::Fn gelu_tanh_mul_ = nullptr;
  named_ops::Scale::Fn scale_ = nullptr;
  named_ops::SoftCap::Fn softcap_ = nullptr;  // only when the final logits are soft-capped
  // Activations in device memory, rows of max_num_batched_tokens.
  DeviceArray<float> x_;     // [T][n_embd] residual stream
  DeviceArray<float> xn_;    // [T][n_embd] normed input of a sub-layer
  DeviceArray<float> tmp_;   // [T][n_embd] sub-layer output
  DeviceArray<float> tmp2_;  // [T][n_embd] sub-layer output after its post-norm
  DeviceArray<float> q_, qn_;  // [T][n_head*head_dim] (qn_: after the per-head norm)
  DeviceArray<float> k_, kn_;  // [T][n_head_kv*head_dim]
  DeviceArray<float> v_;
  DeviceArray<float> attn_;  // [T][n_head*head_dim]
  DeviceArray<float> gate_, up_;  // [T][n_ff]
};

}  // namespace troupe::models
