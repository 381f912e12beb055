// GPT-2 as a troupe Model, written against the SDK alone (what a third party has): the
// platform's Ops and AttentionBackend do every computation in device memory, and the
// paged KV cache comes from the engine, so prefix caching, batching, chunked prefill and
// the scheduler work for it unchanged. The block, as llama.cpp's gpt2 graph:
//   x = token_embd[id] + position_embd[pos]
//   per layer: x += attn_output(attention(qkv(layer_norm(x)))) + bias
//              x += ffn_down(gelu_tanh(ffn_up(layer_norm(x)) + bias)) + bias
//   logits = output(layer_norm(x))     (output is token_embd when the file ties them)
// Layer norms have weights and biases; attention is causal multi-head with scale
// 1/sqrt(head_dim) and no positional rotation. One rank only, no LoRA.
#pragma once

#include <memory>
#include <vector>

#include "gpt2_weights.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"
#include "troupe/named_ops/named_ops.hpp"

namespace gpt2 {

class Gpt2Model final : public troupe::Model {
 public:
  /// The ModelFactory: validates the file; refuses a split over ranks, a platform without
  /// the named op gelu_tanh.v1, and any missing key or tensor, naming it.
  static troupe::Result<std::unique_ptr<troupe::Model>> create(const troupe::ModelSource& source,
                                                               const troupe::ModelContext& context);

  const troupe::ModelInfo& info() const override { return info_; }
  troupe::KvCacheShape kv_cache_shape() const override { return {hp_.n_layer, hp_.n_head, hp_.head_dim}; }
  troupe::Status forward(const troupe::ForwardBatch& batch, float* logits) override;
  /// The last hidden states (after output_norm) of every token: the pooling runner.
  troupe::Status forward_hidden(const troupe::ForwardBatch& batch, float* hidden) override;

 private:
  struct Layer {  // device views
    troupe::WeightTensor attn_norm, attn_norm_b, wq, wk, wv, bq, bk, bv, wo, wo_b, ffn_norm, ffn_norm_b, ffn_up,
        ffn_up_b, ffn_down, ffn_down_b;
  };
  Gpt2Model(HParams hp, const troupe::ModelContext& context);
  troupe::Status place(const Weights& w);
  troupe::Status allocate_activations();
  troupe::Status validate(const troupe::ForwardBatch& batch) const;
  /// Embeddings and every layer: x_ holds the residual stream of every token after it.
  void run_layers(const troupe::ForwardBatch& batch);
  void run_layer(const troupe::ForwardBatch& batch, int l);

  HParams hp_;
  troupe::ModelContext ctx_;
  troupe::DeviceWeights weights_;
  troupe::WeightTensor token_embd_, position_embd_, output_norm_, output_norm_b_, output_;
  std::vector<Layer> layers_;
  troupe::ModelInfo info_;
  troupe::named_ops::GeluTanh::Fn gelu_tanh_ = nullptr;
  // Activations in device memory, rows of max_num_batched_tokens.
  troupe::DeviceArray<float> x_;    // [T][n_embd] residual stream
  troupe::DeviceArray<float> xn_;   // [T][n_embd] layer-normed input of a sub-layer
  troupe::DeviceArray<float> tmp_;  // [T][n_embd] sub-layer output, position rows
  troupe::DeviceArray<float> q_, k_, v_, attn_;  // [T][n_embd]
  troupe::DeviceArray<float> ff_;   // [T][n_ff]
};

}  // namespace gpt2
