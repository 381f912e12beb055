#include "runtime/rank/models/gemma_model.hpp"

#include <cmath>
#include <string>

#include "troupe/attention.hpp"
#include "troupe/log.hpp"
#include "troupe/ops.hpp"

namespace troupe::models {

Result<std::unique_ptr<Model>> GemmaModel::create(const ModelSource& source, const ModelContext& context) {
  if (!context.ops || !context.attention || !context.allocator)
    return invalid_argument("the gemma model needs the platform's ops, attention backend and allocator");
  if (context.max_num_batched_tokens <= 0 || context.max_num_batched_tokens > (int64_t{1} << 20))
    return invalid_argument("max_num_batched_tokens " + std::to_string(context.max_num_batched_tokens) +
                            " is out of range");
  if (context.tp_size * context.pp_size > 1)
    return not_supported("the gemma model runs on one rank: tensor and pipeline parallelism are not implemented for it");
  auto hp = read_gemma_hparams(source);
  if (!hp.ok()) return hp.status();
  auto w = bind_gemma_weights(source, *hp);
  if (!w.ok()) return w.status();
  Ops& ops = *context.ops;
  TROUPE_RETURN_IF_ERROR(check_gemma_weight_types(*w, ops));
  // Gemma's elementwise ops are optional ops of a platform: refuse now, not in the first step.
  const bool needs_softcap = hp->final_softcap > 0;
  for (auto [name, offered] : {std::pair{named_ops::GeluTanhMul::name, named_ops::supports<named_ops::GeluTanhMul>(ops)},
                               std::pair{named_ops::Scale::name, named_ops::supports<named_ops::Scale>(ops)},
                               std::pair{named_ops::SoftCap::name,
                                         !needs_softcap || named_ops::supports<named_ops::SoftCap>(ops)}})
    if (!offered)
      return not_supported("the " + hp->arch + " model needs the op '" + std::string(name) +
                           "', which this platform does not offer");
  std::unique_ptr<GemmaModel> model(new GemmaModel(std::move(*hp), context));
  model->gelu_tanh_mul_ = named_ops::find<named_ops::GeluTanhMul>(ops);
  model->scale_ = named_ops::find<named_ops::Scale>(ops);
  if (needs_softcap) model->softcap_ = named_ops::find<named_ops::SoftCap>(ops);
  model->info_.weight_bytes = w->bytes_per_token;
  for (const AttentionParams* params : {&model->global_attn_, &model->local_attn_})
    TROUPE_RETURN_IF_ERROR(context.attention->check_params(*params));
  TROUPE_RETURN_IF_ERROR(model->place(*w));
  TROUPE_RETURN_IF_ERROR(model->allocate_activations());
  return std::unique_ptr<Model>(std::move(model));
}

GemmaModel::GemmaModel(GemmaHParams hp, const ModelContext& ctx)
    : hp_(std::move(hp)), ctx_(ctx), weights_(*ctx.allocator) {
  info_.architecture = hp_.arch;
  info_.vocab_size = hp_.n_vocab;
  info_.context_length = hp_.n_ctx_train;
  info_.num_layers = hp_.n_layer;
  info_.num_heads = hp_.n_head;
  info_.num_kv_heads = hp_.n_head_kv;
  info_.head_dim = hp_.head_dim;
  info_.hidden_size = hp_.n_embd;
  int local = 0;
  for (bool b : hp_.is_local) local += b ? 1 : 0;
  for (AttentionParams* params : {&global_attn_, &local_attn_}) {
    params->set("scale", hp_.attn_scale);
    if (hp_.attn_softcap > 0) params->set("logit_softcap", hp_.attn_softcap);
  }
  if (local > 0 && hp_.sliding_window > 0) local_attn_.set("sliding_window", hp_.sliding_window);
  TROUPE_LOG_INFO("{} model: {} layers ({} sliding-window of {}, {} global), hidden {}, heads {}/{} (kv), head dim {}, "
                  "ffn {}, vocab {}, rope theta {} (local {}), attention soft-cap {}, final soft-cap {}",
                  hp_.arch, hp_.n_layer, local, hp_.sliding_window, hp_.n_layer - local, hp_.n_embd, hp_.n_head,
                  hp_.n_head_kv, hp_.head_dim, hp_.n_ff, hp_.n_vocab, hp_.rope_theta, hp_.rope_theta_local,
                  hp_.attn_softcap, hp_.final_softcap);
}

Status GemmaModel::place(const GemmaWeights& w) {
  auto put = [this](const WeightTensor* host, WeightTensor& dev) -> Status {
    if (host == nullptr) return {};  // gemma2 has no q/k norms
    auto placed = weights_.place(*host);
    if (!placed.ok()) return placed.status();
    dev = *placed;
    return {};
  };
  TROUPE_RETURN_IF_ERROR(put(w.token_embd, token_embd_));
  TROUPE_RETURN_IF_ERROR(put(w.output_norm, output_norm_));
  TROUPE_RETURN_IF_ERROR(put(w.output, output_));
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const GemmaLayerWeights& h = w.layers[l];
    Layer& d = layers_[l];
    for (auto [src, dst] : {std::pair{h.attn_norm, &d.attn_norm}, std::pair{h.wq, &d.wq}, std::pair{h.wk, &d.wk},
                            std::pair{h.wv, &d.wv}, std::pair{h.wo, &d.wo}, std::pair{h.q_norm, &d.q_norm},
                            std::pair{h.k_norm, &d.k_norm}, std::pair{h.post_attn_norm, &d.post_attn_norm},
                            std::pair{h.ffn_norm, &d.ffn_norm}, std::pair{h.ffn_gate, &d.ffn_gate},
                            std::pair{h.ffn_up, &d.ffn_up}, std::pair{h.ffn_down, &d.ffn_down},
                            std::pair{h.post_ffn_norm, &d.post_ffn_norm}})
      TROUPE_RETURN_IF_ERROR(put(src, *dst));
  }
  return {};
}

Status GemmaModel::allocate_activations() {
  DeviceAllocator& mem = *ctx_.allocator;
  const int64_t T = ctx_.max_num_batched_tokens;
  const int64_t q_dim = int64_t{hp_.n_head} * hp_.head_dim;
  const int64_t kv_dim = int64_t{hp_.n_head_kv} * hp_.head_dim;
  for (auto [array, cols] :
       {std::pair{&x_, hp_.n_embd}, std::pair{&xn_, hp_.n_embd}, std::pair{&tmp_, hp_.n_embd},
        std::pair{&tmp2_, hp_.n_embd}, std::pair{&q_, q_dim}, std::pair{&qn_, q_dim}, std::pair{&k_, kv_dim},
        std::pair{&kn_, kv_dim}, std::pair{&v_, kv_dim}, std::pair{&attn_, q_dim}, std::pair{&gate_, hp_.n_ff},
        std::pair{&up_, hp_.n_ff}})
    TROUPE_RETURN_IF_ERROR(array->allocate(mem, T * cols));
  return {};
}

Status GemmaModel::validate(const ForwardBatch& b) const {
  const int64_t T = b.num_tokens();
  const int64_t S = b.num_seqs();
  if (T <= 0) return invalid_argument("forward batch has no tokens");
  if (T > ctx_.max_num_batched_tokens)
    return invalid_argument("forward batch has " + std::to_string(T) + " tokens, more than max_num_batched_tokens " +
                            std::to_string(ctx_.max_num_batched_tokens));
  if (static_cast<int64_t>(b.positions.size()) != T || static_cast<int64_t>(b.slot_mapping.size()) != T)
    return invalid_argument("forward batch: positions and slot_mapping need one entry per token");
  if (S <= 0 || static_cast<int64_t>(b.query_start.size()) != S + 1 ||
      static_cast<int64_t>(b.block_tables.size()) != S || static_cast<int64_t>(b.seq_lens.size()) != S)
    return invalid_argument("forward batch: query_start needs num_seqs+1 entries, block_tables and seq_lens num_seqs");
  if (b.query_start.front() != 0 || b.query_start.back() != T)
    return invalid_argument("forward batch: query_start must start at 0 and end at num_tokens");
  for (int64_t s = 0; s < S; ++s) {
    const int32_t q_len = b.query_start[s + 1] - b.query_start[s];
    if (q_len <= 0) return invalid_argument("forward batch: sequence " + std::to_string(s) + " has no tokens");
    if (b.seq_lens[s] < q_len)
      return invalid_argument("forward batch: seq_lens[" + std::to_string(s) + "] is inconsistent");
  }
  for (int64_t t = 0; t < T; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= hp_.n_vocab)
      return out_of_range("token id " + std::to_string(b.token_ids[t]) + " is outside the vocabulary of " +
                          std::to_string(hp_.n_vocab));
    if (b.positions[t] < 0) return invalid_argument("forward batch: negative position");
  }
  for (int32_t r : b.logits_indices)
    if (r < 0 || r >= T) return out_of_range("logits index " + std::to_string(r) + " is outside the batch");
  for (int64_t id : b.lora_ids)
    if (id != 0) return not_supported("LoRA adapters are not supported by the " + hp_.arch + " model");
  return {};
}

void GemmaModel::run_layer(const ForwardBatch& b, int l) {
  Ops& ops = *ctx_.ops;
  const Layer& L = layers_[static_cast<size_t>(l)];
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  const bool local = hp_.is_local[static_cast<size_t>(l)];
  ops.rms_norm(x_.data(), static_cast<const float*>(L.attn_norm.data), T, E, hp_.rms_eps, xn_.data());
  const WeightTensor* qkv[3] = {&L.wq, &L.wk, &L.wv};
  float* qkv_out[3] = {q_.data(), k_.data(), v_.data()};
  ops.matmul_multi(qkv, qkv_out, 3, xn_.data(), T);
  float* q = q_.data();
  float* k = k_.data();
  if (hp_.qk_norm) {  // gemma3: each head's q and k normed over head_dim
    ops.rms_norm(q, static_cast<const float*>(L.q_norm.data), T * hp_.n_head, hp_.head_dim, hp_.rms_eps, qn_.data());
    ops.rms_norm(k, static_cast<const float*>(L.k_norm.data), T * hp_.n_head_kv, hp_.head_dim, hp_.rms_eps,
                 kn_.data());
    q = qn_.data();
    k = kn_.data();
  }
  const float theta = local ? hp_.rope_theta_local : hp_.rope_theta;
  ops.rope(q, b.positions.data(), T, hp_.n_head, hp_.head_dim, theta, /*neox=*/true);
  ops.rope(k, b.positions.data(), T, hp_.n_head_kv, hp_.head_dim, theta, /*neox=*/true);
  ctx_.attention->forward(l, q, k, v_.data(), attn_.data(), hp_.n_head, b, local ? local_attn_ : global_attn_);
  ops.matmul(L.wo, attn_.data(), T, tmp_.data());
  ops.rms_norm(tmp_.data(), static_cast<const float*>(L.post_attn_norm.data), T, E, hp_.rms_eps, tmp2_.data());
  ops.add_inplace(x_.data(), tmp2_.data(), T * E);

  ops.rms_norm(x_.data(), static_cast<const float*>(L.ffn_norm.data), T, E, hp_.rms_eps, xn_.data());
  const WeightTensor* gu[2] = {&L.ffn_gate, &L.ffn_up};
  float* gu_out[2] = {gate_.data(), up_.data()};
  ops.matmul_multi(gu, gu_out, 2, xn_.data(), T);
  gelu_tanh_mul_(ops, gate_.data(), up_.data(), T * hp_.n_ff, gate_.data());
  ops.matmul(L.ffn_down, gate_.data(), T, tmp_.data());
  ops.rms_norm(tmp_.data(), static_cast<const float*>(L.post_ffn_norm.data), T, E, hp_.rms_eps, tmp2_.data());
  ops.add_inplace(x_.data(), tmp2_.data(), T * E);
}

Status GemmaModel::forward(const ForwardBatch& b, float* logits) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  Ops& ops = *ctx_.ops;
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  ops.embedding(token_embd_, b.token_ids.data(), T, x_.data());
  scale_(ops, x_.data(), T * E, std::sqrt(static_cast<float>(E)));
  for (int l = 0; l < hp_.n_layer; ++l) run_layer(b, l);
  const int64_t R = static_cast<int64_t>(b.logits_indices.size());
  if (R == 0) return {};
  if (logits == nullptr) return internal_error("the gemma model was given no logits buffer");
  DeviceAllocator& mem = *ctx_.allocator;
  const auto row = static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < R; ++r)
    TROUPE_RETURN_IF_ERROR(mem.copy(tmp_.data() + r * E, x_.data() + static_cast<int64_t>(b.logits_indices[r]) * E,
                                    E * row, CopyKind::device_to_device));
  ops.rms_norm(tmp_.data(), static_cast<const float*>(output_norm_.data), R, E, hp_.rms_eps, xn_.data());
  ops.matmul(output_, xn_.data(), R, logits);
  if (softcap_ != nullptr) softcap_(ops, logits, R * hp_.n_vocab, hp_.final_softcap);
  return {};
}

}  // namespace troupe::models
