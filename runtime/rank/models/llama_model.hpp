// The Llama-style decoders (Llama 1-3, SmolLM, TinyLlama, Qwen2/2.5, Qwen3,
// Phi-3, and the mixture-of-experts Mixtral, Qwen3-MoE, OLMoE and gpt-oss:
// decoder_arch.hpp): GQA, RoPE (with frequency factors), RMSNorm, optional
// Q/K/V biases and q/k norms, SwiGLU or experts (moe_ffn.hpp), attention sinks and
// alternating windows (gpt-oss), tied or separate output, over the platform's Ops and
// AttentionBackend. Activations are preallocated for max_num_batched_tokens.
// Split over ranks by ModelContext (tp/pp rank and size): each rank runs its
// share (llama_shard.hpp) and the communicators join the shares.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "runtime/rank/models/llama_hparams.hpp"
#include "runtime/rank/models/llama_shard.hpp"
#include "runtime/rank/models/moe_ffn.hpp"
#include "troupe/attention.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/named_ops/custom_ops.hpp"
#include "troupe/model.hpp"
#include "troupe/named_ops/rope_ops.hpp"

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
  /// LoRA targets: the attention and MLP projections of every layer
  /// (blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight) that the
  /// file has as tensors of those names (not phi3's fused attn_qkv and ffn_up).
  bool applies_lora(std::string_view name) const override;
  const LlamaHParams& hparams() const { return hp_; }
  const LlamaShard& shard() const { return shard_; }

 private:
  LlamaModel(LlamaHParams hp, LlamaWeights w, LlamaShard shard, const ModelContext& ctx);
  Status allocate_activations();
  Status validate(const ForwardBatch& batch) const;
  Status run_layers(const ForwardBatch& batch);
  Status embed(const ForwardBatch& batch);
  /// RoPE of q or k ([T][n_heads][head_dim]) with the file's scaling, if any.
  void rotate(float* x, const ForwardBatch& batch, int n_heads);
  /// The q/k RMS norms of one layer: per head, or over the whole projection (olmoe; under
  /// tensor parallelism over every rank's heads, gathered).
  Status norm_qk(const LlamaShardLayer& L, int64_t n_tokens);
  /// OLMoE's norm of x ([T][local heads * head_dim]) over every rank's heads, in place.
  Status norm_full_width(float* x, const float* weight, int64_t n_tokens, int64_t local_width);
  /// Each layer's attention parameters (scale, window, sinks), checked against the backend.
  Status set_attention_params();
  /// The experts of this stage's layers, split over the stage's ranks (moe_shard.hpp).
  Status create_moe();
  Status output(const ForwardBatch& batch, float* logits);
  /// LoRA: y += B (A x) of base matrix `w` on the rows of every sequence whose adapter
  /// targets it (x: [T][in], y: [T][out]); nothing when no sequence of the step has one.
  Status apply_lora(const ForwardBatch& batch, const WeightTensor& w, const float* x, float* y);
  int global_rank(int pp_rank, int tp_rank) const { return pp_rank * shard_.tp_size + tp_rank; }

  LlamaHParams hp_;
  LlamaWeights w_;   // the whole file's tensors, checked
  ModelContext ctx_;
  DeviceWeights weights_;  // this rank's share in device memory (the file itself on the CPU)
  // The forward pass's overridable ops (plugins may replace them by name).
  CustomOp<custom_ops::RmsNorm::Fn> rms_norm_ = custom_ops::make<custom_ops::RmsNorm>();
  CustomOp<custom_ops::RotaryEmbedding::Fn> rope_ = custom_ops::make<custom_ops::RotaryEmbedding>();
  CustomOp<custom_ops::SiluAndMul::Fn> silu_and_mul_ = custom_ops::make<custom_ops::SiluAndMul>();
  // RoPE with frequency factors (hp_.rope_scaling active): the platform's named op, and the
  // factors in device memory.
  named_ops::RopeFreqFactors::Fn rope_freq_factors_ = nullptr;
  DeviceArray<float> rope_factors_;
  LlamaShard shard_;       // views of this rank's share, placed in weights_
  std::vector<AttentionParams> attn_params_;  // per layer of this stage: scale, window, sinks
  std::unique_ptr<MoeFfn> moe_;  // the experts (hp_.moe.active())
  ModelInfo info_;
  // Activations in device memory, rows of max_num_batched_tokens; "local" = this tensor rank's share.
  DeviceArray<float> x_;     // [T][n_embd] residual stream (the same on every rank of a stage)
  DeviceArray<float> xn_;    // [T][n_embd] normed input of a sub-layer
  DeviceArray<float> tmp_;   // [T][n_embd] sub-layer output (a partial sum before its all_reduce)
  DeviceArray<float> q_;     // [T][n_head_local*head_dim]
  DeviceArray<float> k_;     // [T][n_head_kv_local*head_dim]
  DeviceArray<float> v_;     // [T][n_head_kv_local*head_dim]
  DeviceArray<float> attn_;  // [T][n_head_local*head_dim]
  DeviceArray<float> gate_;  // [T][ff_local]
  DeviceArray<float> up_;    // [T][ff_local]
  // OLMoE under tensor parallelism: every rank's q (or k) rows, gathered, and as whole rows.
  DeviceArray<float> gathered_qk_;  // [tp][T][local width]
  DeviceArray<float> full_qk_;      // [T][tp * local width]
  // Output head under parallelism, grown to the rows a step asks for.
  DeviceArray<float> vocab_part_;  // [R][vocab_max]: this rank's vocabulary slice of the logits
  DeviceArray<float> gathered_;    // [tp][R][vocab_max]: every slice, at tensor rank 0
  DeviceArray<float> logits_buf_;  // [R][n_vocab]: the last stage's logits when it is not rank 0
  // LoRA scratch, grown to the largest row range a step applies an adapter to.
  DeviceArray<float> lora_mid_;    // [rows][rank]: A x
  DeviceArray<float> lora_out_;    // [rows][out]: B (A x)
};

}  // namespace troupe::models
