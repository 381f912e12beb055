#include "runtime/models/llama_model.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "troupe/attention.hpp"
#include "troupe/log.hpp"
#include "troupe/ops.hpp"

namespace troupe::models {

Result<std::unique_ptr<Model>> LlamaModel::create(const ModelSource& source, const ModelContext& context) {
  if (!context.ops || !context.attention)
    return invalid_argument("the llama model needs the platform's ops and attention backend");
  if (context.max_num_batched_tokens <= 0 || context.max_num_batched_tokens > (int64_t{1} << 20))
    return invalid_argument("max_num_batched_tokens " + std::to_string(context.max_num_batched_tokens) +
                            " is out of range");
  auto hp = read_llama_hparams(source);
  if (!hp.ok()) return hp.status();
  auto w = bind_llama_weights(source, *hp);
  if (!w.ok()) return w.status();
  TROUPE_RETURN_IF_ERROR(check_llama_weight_types(*w, *context.ops));
  return std::unique_ptr<Model>(new LlamaModel(std::move(*hp), std::move(*w), context));
}

LlamaModel::LlamaModel(LlamaHParams hp, LlamaWeights w, const ModelContext& ctx)
    : hp_(std::move(hp)), w_(std::move(w)), ctx_(ctx) {
  info_.architecture = hp_.arch;
  info_.vocab_size = hp_.n_vocab;
  info_.context_length = hp_.n_ctx_train;
  info_.num_layers = hp_.n_layer;
  info_.num_heads = hp_.n_head;
  info_.num_kv_heads = hp_.n_head_kv;
  info_.head_dim = hp_.head_dim;
  info_.hidden_size = hp_.n_embd;
  info_.weight_bytes = w_.bytes_per_token;
  const size_t T = static_cast<size_t>(ctx_.max_num_batched_tokens);
  const size_t q_dim = static_cast<size_t>(hp_.n_head) * hp_.head_dim;
  const size_t kv_dim = static_cast<size_t>(hp_.n_head_kv) * hp_.head_dim;
  x_.resize(T * hp_.n_embd);
  xn_.resize(T * hp_.n_embd);
  tmp_.resize(T * hp_.n_embd);
  q_.resize(T * q_dim);
  k_.resize(T * kv_dim);
  v_.resize(T * kv_dim);
  attn_.resize(T * q_dim);
  gate_.resize(T * hp_.n_ff);
  up_.resize(T * hp_.n_ff);
  TROUPE_LOG_INFO("llama model: {} layers, hidden {}, heads {}/{} (kv), head dim {}, ffn {}, vocab {}, rope {} theta {}, "
                  "{} output",
                  hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.head_dim, hp_.n_ff, hp_.n_vocab,
                  hp_.rope_neox ? "neox" : "normal", hp_.rope_theta, w_.tied_output ? "tied" : "separate");
}

Status LlamaModel::validate(const ForwardBatch& b) const {
  const int64_t T = b.num_tokens();
  const int64_t S = b.num_seqs();
  if (T <= 0) return invalid_argument("forward batch has no tokens");
  if (T > ctx_.max_num_batched_tokens)
    return invalid_argument("forward batch has " + std::to_string(T) + " tokens, more than max_num_batched_tokens " +
                            std::to_string(ctx_.max_num_batched_tokens));
  if (static_cast<int64_t>(b.positions.size()) != T || static_cast<int64_t>(b.slot_mapping.size()) != T)
    return invalid_argument("forward batch: positions and slot_mapping need one entry per token");
  if (S <= 0 || static_cast<int64_t>(b.query_start.size()) != S + 1 ||
      static_cast<int64_t>(b.block_tables.size()) != S)
    return invalid_argument("forward batch: query_start needs num_seqs+1 entries and block_tables num_seqs");
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
  return {};
}

Status LlamaModel::forward(const ForwardBatch& b, float* logits) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  Ops& ops = *ctx_.ops;
  AttentionBackend& attn = *ctx_.attention;
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));

  ops.embedding(*w_.token_embd, b.token_ids.data(), T, x_.data());
  for (int l = 0; l < hp_.n_layer; ++l) {
    const LlamaLayerWeights& L = w_.layers[l];
    ops.rms_norm(x_.data(), static_cast<const float*>(L.attn_norm->data), T, E, hp_.rms_eps, xn_.data());
    ops.matmul(*L.wq, xn_.data(), T, q_.data());
    ops.matmul(*L.wk, xn_.data(), T, k_.data());
    ops.matmul(*L.wv, xn_.data(), T, v_.data());
    ops.rope(q_.data(), b.positions.data(), T, hp_.n_head, hp_.head_dim, hp_.rope_theta, hp_.rope_neox);
    ops.rope(k_.data(), b.positions.data(), T, hp_.n_head_kv, hp_.head_dim, hp_.rope_theta, hp_.rope_neox);
    attn.forward(l, q_.data(), k_.data(), v_.data(), attn_.data(), hp_.n_head, b, scale);
    ops.matmul(*L.wo, attn_.data(), T, tmp_.data());
    ops.add_inplace(x_.data(), tmp_.data(), T * E);

    ops.rms_norm(x_.data(), static_cast<const float*>(L.ffn_norm->data), T, E, hp_.rms_eps, xn_.data());
    ops.matmul(*L.ffn_gate, xn_.data(), T, gate_.data());
    ops.matmul(*L.ffn_up, xn_.data(), T, up_.data());
    ops.silu_mul(gate_.data(), up_.data(), T * hp_.n_ff, gate_.data());
    ops.matmul(*L.ffn_down, gate_.data(), T, tmp_.data());
    ops.add_inplace(x_.data(), tmp_.data(), T * E);
  }
  // Only the rows whose logits are wanted go through the output head.
  const int64_t R = static_cast<int64_t>(b.logits_indices.size());
  if (R == 0) return {};
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(tmp_.data() + r * E, x_.data() + static_cast<int64_t>(b.logits_indices[r]) * E, E * sizeof(float));
  ops.rms_norm(tmp_.data(), static_cast<const float*>(w_.output_norm->data), R, E, hp_.rms_eps, xn_.data());
  ops.matmul(*w_.output, xn_.data(), R, logits);
  return {};
}

}  // namespace troupe::models
