// The BERT encoder (BertModel: all-MiniLM-L6-v2 and its family) over the
// platform's Ops: word + position + token-type embeddings and LayerNorm, then
// post-LN layers of bidirectional self-attention within each sequence and a
// GELU MLP, every Linear with its bias. It keeps no KV cache and gives no
// logits: it runs as a pooling model (forward_hidden), each sequence whole in
// one step. Hyperparameters come from the model's config (config.json keys).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"

namespace troupe::models {

struct BertHParams {
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_ff = 0, n_pos = 0, n_types = 0;
  int64_t head_dim = 0;
  float eps = 1e-12f;
};

struct BertLayer {
  const WeightTensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *attn_ln_w, *attn_ln_b;
  const WeightTensor *w_in, *b_in, *w_out, *b_out, *out_ln_w, *out_ln_b;
};

class BertModel final : public Model {
 public:
  /// Validates the config and every tensor's shape and type; never crashes on a malformed model.
  static Result<std::unique_ptr<Model>> create(const ModelSource& source, const ModelContext& context);

  const ModelInfo& info() const override { return info_; }
  KvCacheShape kv_cache_shape() const override { return {0, 0, 0}; }
  Status forward(const ForwardBatch& batch, float* logits) override;
  Status forward_hidden(const ForwardBatch& batch, float* hidden) override;

 private:
  BertModel(BertHParams hp, const ModelContext& ctx) : hp_(hp), ctx_(ctx), weights_(*ctx.allocator) {}
  Status validate(const ForwardBatch& batch) const;
  const float* f32(const WeightTensor* t) const { return static_cast<const float*>(t->data); }

  BertHParams hp_;
  ModelContext ctx_;
  ModelInfo info_;
  DeviceWeights weights_;             // the tensors below, in device memory
  std::deque<WeightTensor> placed_;   // their views (stable addresses for the pointers)
  const WeightTensor *word_, *pos_, *type_, *emb_ln_w_, *emb_ln_b_;
  std::vector<BertLayer> layers_;
  // Activations in device memory, rows of max_num_batched_tokens.
  DeviceArray<float> x_, tmp_, q_, k_, v_, attn_, ff_;
  DeviceArray<float> type_row_;  // token type 0's embedding, as f32
};

}  // namespace troupe::models
