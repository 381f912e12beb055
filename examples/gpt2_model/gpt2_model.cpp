#include "gpt2_model.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "troupe/attention.hpp"
#include "troupe/log.hpp"
#include "troupe/ops.hpp"

namespace gpt2 {

using troupe::ForwardBatch;
using troupe::Result;
using troupe::Status;
using troupe::WeightTensor;

Result<std::unique_ptr<troupe::Model>> Gpt2Model::create(const troupe::ModelSource& source,
                                                         const troupe::ModelContext& context) {
  if (!context.ops || !context.attention || !context.allocator)
    return troupe::invalid_argument("the gpt2 model needs the platform's ops, attention backend and allocator");
  if (context.max_num_batched_tokens <= 0 || context.max_num_batched_tokens > (int64_t{1} << 20))
    return troupe::invalid_argument("max_num_batched_tokens " + std::to_string(context.max_num_batched_tokens) +
                                    " is out of range");
  if (context.tp_size * context.pp_size > 1)
    return troupe::not_supported(
        "the gpt2 model runs on one rank: tensor and pipeline parallelism are not implemented for it");
  // GPT-2's activation is an optional op of a platform: refuse now, not in the first step.
  if (!troupe::named_ops::supports<troupe::named_ops::GeluTanh>(*context.ops))
    return troupe::not_supported("the gpt2 model needs the op '" + std::string(troupe::named_ops::GeluTanh::name) +
                                 "', which this platform does not offer");
  auto hp = read_hparams(source);
  if (!hp.ok()) return hp.status();
  auto w = bind_weights(source, *hp, *context.ops);
  if (!w.ok()) return w.status();
  std::unique_ptr<Gpt2Model> model(new Gpt2Model(*hp, context));
  model->gelu_tanh_ = troupe::named_ops::find<troupe::named_ops::GeluTanh>(*context.ops);
  model->info_.weight_bytes = w->bytes_per_token;
  TROUPE_RETURN_IF_ERROR(model->place(*w));
  TROUPE_RETURN_IF_ERROR(model->allocate_activations());
  return std::unique_ptr<troupe::Model>(std::move(model));
}

Gpt2Model::Gpt2Model(HParams hp, const troupe::ModelContext& context)
    : hp_(hp), ctx_(context), weights_(*context.allocator) {
  info_.architecture = "gpt2";
  info_.vocab_size = hp_.n_vocab;
  info_.context_length = hp_.n_ctx;  // no position past the learned ones
  info_.num_layers = hp_.n_layer;
  info_.num_heads = hp_.n_head;
  info_.num_kv_heads = hp_.n_head;
  info_.head_dim = hp_.head_dim;
  info_.hidden_size = hp_.n_embd;
  TROUPE_LOG_INFO("gpt2 model (plugin gpt2_model): {} layers, hidden {}, {} heads of {}, ffn {}, vocab {}, "
                  "{} positions",
                  hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.head_dim, hp_.n_ff, hp_.n_vocab, hp_.n_ctx);
}

Status Gpt2Model::place(const Weights& w) {
  // On the CPU a placed view is the mapped file itself; on an accelerator, a copy in its memory.
  auto put = [this](const WeightTensor& host, WeightTensor& dev) -> Status {
    auto placed = weights_.place(host);
    if (!placed.ok()) return placed.status();
    dev = *placed;
    return {};
  };
  TROUPE_RETURN_IF_ERROR(put(*w.token_embd, token_embd_));
  TROUPE_RETURN_IF_ERROR(put(*w.position_embd, position_embd_));
  TROUPE_RETURN_IF_ERROR(put(*w.output_norm, output_norm_));
  TROUPE_RETURN_IF_ERROR(put(*w.output_norm_b, output_norm_b_));
  TROUPE_RETURN_IF_ERROR(put(*w.output, output_));
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& h = w.layers[l];
    Layer& d = layers_[l];
    const std::pair<const WeightTensor*, WeightTensor*> parts[] = {
        {h.attn_norm, &d.attn_norm}, {h.attn_norm_b, &d.attn_norm_b}, {&h.wq, &d.wq},
        {&h.wk, &d.wk},              {&h.wv, &d.wv},                   {&h.bq, &d.bq},
        {&h.bk, &d.bk},              {&h.bv, &d.bv},                   {h.wo, &d.wo},
        {h.wo_b, &d.wo_b},           {h.ffn_norm, &d.ffn_norm},        {h.ffn_norm_b, &d.ffn_norm_b},
        {h.ffn_up, &d.ffn_up},       {h.ffn_up_b, &d.ffn_up_b},        {h.ffn_down, &d.ffn_down},
        {h.ffn_down_b, &d.ffn_down_b}};
    for (auto [src, dst] : parts) TROUPE_RETURN_IF_ERROR(put(*src, *dst));
  }
  return {};
}

Status Gpt2Model::allocate_activations() {
  troupe::DeviceAllocator& mem = *ctx_.allocator;
  const int64_t T = ctx_.max_num_batched_tokens;
  for (troupe::DeviceArray<float>* a : {&x_, &xn_, &tmp_, &q_, &k_, &v_, &attn_})
    TROUPE_RETURN_IF_ERROR(a->allocate(mem, T * hp_.n_embd));
  return ff_.allocate(mem, T * hp_.n_ff);
}

// What the model itself indexes with: the engine's worker has checked the batch against the
// KV cache (AttentionBackend::check_batch) already.
Status Gpt2Model::validate(const ForwardBatch& b) const {
  const int64_t T = b.num_tokens();
  if (T <= 0) return troupe::invalid_argument("forward batch has no tokens");
  if (T > ctx_.max_num_batched_tokens)
    return troupe::invalid_argument("forward batch has " + std::to_string(T) +
                                    " tokens, more than max_num_batched_tokens " +
                                    std::to_string(ctx_.max_num_batched_tokens));
  if (static_cast<int64_t>(b.positions.size()) != T)
    return troupe::invalid_argument("forward batch: positions need one entry per token");
  for (int64_t t = 0; t < T; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= hp_.n_vocab)
      return troupe::out_of_range("token id " + std::to_string(b.token_ids[t]) + " is outside the vocabulary of " +
                                  std::to_string(hp_.n_vocab));
    if (b.positions[t] < 0 || b.positions[t] >= hp_.n_ctx)
      return troupe::out_of_range("position " + std::to_string(b.positions[t]) + " is past gpt2's " +
                                  std::to_string(hp_.n_ctx) + " learned positions");
  }
  for (int32_t r : b.logits_indices)
    if (r < 0 || r >= T) return troupe::out_of_range("logits index " + std::to_string(r) + " is outside the batch");
  for (int64_t id : b.lora_ids)
    if (id != 0) return troupe::not_supported("LoRA adapters are not supported by the gpt2 model");
  return {};
}

void Gpt2Model::run_layer(const ForwardBatch& b, int l) {
  troupe::Ops& ops = *ctx_.ops;
  const Layer& L = layers_[static_cast<size_t>(l)];
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  auto f = [](const WeightTensor& t) { return static_cast<const float*>(t.data); };

  ops.layer_norm(x_.data(), f(L.attn_norm), f(L.attn_norm_b), T, E, hp_.norm_eps, xn_.data());
  const WeightTensor* qkv[3] = {&L.wq, &L.wk, &L.wv};
  float* qkv_out[3] = {q_.data(), k_.data(), v_.data()};
  ops.matmul_multi(qkv, qkv_out, 3, xn_.data(), T);
  ops.add_bias(q_.data(), f(L.bq), T, E);
  ops.add_bias(k_.data(), f(L.bk), T, E);
  ops.add_bias(v_.data(), f(L.bv), T, E);
  // Stores this step's k and v in the paged cache, then attends over each sequence's cache.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  ctx_.attention->forward(l, q_.data(), k_.data(), v_.data(), attn_.data(), hp_.n_head, b, scale);
  ops.matmul(L.wo, attn_.data(), T, tmp_.data());
  ops.add_bias(tmp_.data(), f(L.wo_b), T, E);
  ops.add_inplace(x_.data(), tmp_.data(), T * E);

  ops.layer_norm(x_.data(), f(L.ffn_norm), f(L.ffn_norm_b), T, E, hp_.norm_eps, xn_.data());
  ops.matmul(L.ffn_up, xn_.data(), T, ff_.data());
  ops.add_bias(ff_.data(), f(L.ffn_up_b), T, hp_.n_ff);
  gelu_tanh_(ops, ff_.data(), T * hp_.n_ff, ff_.data());
  ops.matmul(L.ffn_down, ff_.data(), T, tmp_.data());
  ops.add_bias(tmp_.data(), f(L.ffn_down_b), T, E);
  ops.add_inplace(x_.data(), tmp_.data(), T * E);
}

void Gpt2Model::run_layers(const ForwardBatch& b) {
  troupe::Ops& ops = *ctx_.ops;
  const int64_t T = b.num_tokens();
  // Token ids and positions are host memory (Ops' contract); the platform stages them.
  ops.embedding(token_embd_, b.token_ids.data(), T, x_.data());
  ops.embedding(position_embd_, b.positions.data(), T, tmp_.data());
  ops.add_inplace(x_.data(), tmp_.data(), T * hp_.n_embd);
  for (int l = 0; l < hp_.n_layer; ++l) run_layer(b, l);
}

Status Gpt2Model::forward(const ForwardBatch& b, float* logits) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  run_layers(b);
  const auto R = static_cast<int64_t>(b.logits_indices.size());
  if (R == 0) return {};
  if (logits == nullptr) return troupe::internal_error("the gpt2 model was given no logits buffer");
  // Only the rows whose logits are wanted go through the head.
  const int64_t E = hp_.n_embd;
  const auto row = E * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < R; ++r)
    TROUPE_RETURN_IF_ERROR(ctx_.allocator->copy(tmp_.data() + r * E,
                                                x_.data() + static_cast<int64_t>(b.logits_indices[r]) * E, row,
                                                troupe::CopyKind::device_to_device));
  troupe::Ops& ops = *ctx_.ops;
  ops.layer_norm(tmp_.data(), static_cast<const float*>(output_norm_.data),
                 static_cast<const float*>(output_norm_b_.data), R, E, hp_.norm_eps, xn_.data());
  ops.matmul(output_, xn_.data(), R, logits);
  return {};
}

Status Gpt2Model::forward_hidden(const ForwardBatch& b, float* hidden) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  if (hidden == nullptr) return troupe::internal_error("the gpt2 model was given no hidden-state buffer");
  run_layers(b);
  // The last hidden states are the final norm's output, as the output head sees them.
  ctx_.ops->layer_norm(x_.data(), static_cast<const float*>(output_norm_.data),
                       static_cast<const float*>(output_norm_b_.data), b.num_tokens(), hp_.n_embd, hp_.norm_eps,
                       hidden);
  return {};
}

}  // namespace gpt2
