#include "runtime/rank/models/bert_model.hpp"

#include <cmath>
#include <string>

#include "troupe/device_memory.hpp"
#include "troupe/log.hpp"
#include "troupe/ops.hpp"

namespace troupe::models {
namespace {

Result<int64_t> required(const ModelSource& s, const std::string& key) {
  auto v = s.get_int(key);
  if (!v) return invalid_argument("BERT config: '" + key + "' is missing or not an integer");
  if (*v <= 0 || *v > (int64_t{1} << 24))
    return invalid_argument("BERT config: '" + key + "' is " + std::to_string(*v) + ", out of range");
  return *v;
}

/// The tensor `name` with ne = {ne0, ne1} (ne1 = 1 for a vector), of a type the ops compute.
Result<const WeightTensor*> tensor(const ModelSource& s, const Ops& ops, const std::string& name, int64_t ne0,
                                   int64_t ne1 = 1, bool f32_only = false) {
  const WeightTensor* t = s.tensor(name);
  if (!t) return not_found("BERT weights: tensor '" + name + "' is missing");
  if (t->ne[0] != ne0 || t->rows() != ne1)
    return invalid_argument("BERT weights: tensor '" + name + "' has shape [" + std::to_string(t->ne[0]) + ", " +
                            std::to_string(t->rows()) + "], expected [" + std::to_string(ne0) + ", " +
                            std::to_string(ne1) + "]");
  if (f32_only && t->type != DType::f32)
    return not_supported("BERT weights: tensor '" + name + "' is " + std::string(to_string(t->type)) +
                         "; biases and norms must be f32");
  if (!f32_only) TROUPE_RETURN_IF_ERROR(ops.check_weight_type(t->type));
  return t;
}

}  // namespace

Result<std::unique_ptr<Model>> BertModel::create(const ModelSource& source, const ModelContext& context) {
  if (!context.ops || !context.allocator) return invalid_argument("the BERT model needs the platform's ops and allocator");
  if (context.tp_size * context.pp_size > 1)
    return not_supported("the BERT model cannot be split over ranks yet (tensor/pipeline parallel size 1 only)");
  if (context.max_num_batched_tokens <= 0 || context.max_num_batched_tokens > (int64_t{1} << 20))
    return invalid_argument("max_num_batched_tokens " + std::to_string(context.max_num_batched_tokens) +
                            " is out of range");
  BertHParams hp;
  for (auto [key, field] : {std::pair{"vocab_size", &hp.n_vocab}, std::pair{"hidden_size", &hp.n_embd},
                            std::pair{"num_hidden_layers", &hp.n_layer}, std::pair{"num_attention_heads", &hp.n_head},
                            std::pair{"intermediate_size", &hp.n_ff}, std::pair{"max_position_embeddings", &hp.n_pos},
                            std::pair{"type_vocab_size", &hp.n_types}}) {
    auto v = required(source, key);
    if (!v) return v.status();
    *field = *v;
  }
  if (hp.n_embd % hp.n_head != 0)
    return invalid_argument("BERT config: hidden_size " + std::to_string(hp.n_embd) +
                            " is not a multiple of num_attention_heads " + std::to_string(hp.n_head));
  hp.head_dim = hp.n_embd / hp.n_head;
  hp.eps = static_cast<float>(source.get_float("layer_norm_eps").value_or(1e-12));
  if (auto act = source.get_string("hidden_act"); act && *act != "gelu")
    return not_supported("BERT config: hidden_act '" + *act + "' is not supported (gelu only)");
  if (auto pos = source.get_string("position_embedding_type"); pos && *pos != "absolute")
    return not_supported("BERT config: position_embedding_type '" + *pos + "' is not supported (absolute only)");

  std::unique_ptr<BertModel> m(new BertModel(hp, context));
  const Ops& ops = *context.ops;
  const int64_t E = hp.n_embd;
  auto bind = [&](const WeightTensor*& out, const std::string& name, int64_t ne0, int64_t ne1, bool f32) -> Status {
    auto t = tensor(source, ops, name, ne0, ne1, f32);
    if (!t) return t.status();
    auto placed = m->weights_.place(**t);
    if (!placed) return placed.status();
    m->placed_.push_back(*placed);
    out = &m->placed_.back();
    return {};
  };
  TROUPE_RETURN_IF_ERROR(bind(m->word_, "embeddings.word_embeddings.weight", E, hp.n_vocab, false));
  TROUPE_RETURN_IF_ERROR(bind(m->pos_, "embeddings.position_embeddings.weight", E, hp.n_pos, false));
  TROUPE_RETURN_IF_ERROR(bind(m->type_, "embeddings.token_type_embeddings.weight", E, hp.n_types, false));
  TROUPE_RETURN_IF_ERROR(bind(m->emb_ln_w_, "embeddings.LayerNorm.weight", E, 1, true));
  TROUPE_RETURN_IF_ERROR(bind(m->emb_ln_b_, "embeddings.LayerNorm.bias", E, 1, true));
  uint64_t bytes = 0;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    BertLayer L{};
    TROUPE_RETURN_IF_ERROR(bind(L.wq, p + "attention.self.query.weight", E, E, false));
    TROUPE_RETURN_IF_ERROR(bind(L.bq, p + "attention.self.query.bias", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.wk, p + "attention.self.key.weight", E, E, false));
    TROUPE_RETURN_IF_ERROR(bind(L.bk, p + "attention.self.key.bias", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.wv, p + "attention.self.value.weight", E, E, false));
    TROUPE_RETURN_IF_ERROR(bind(L.bv, p + "attention.self.value.bias", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.wo, p + "attention.output.dense.weight", E, E, false));
    TROUPE_RETURN_IF_ERROR(bind(L.bo, p + "attention.output.dense.bias", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.attn_ln_w, p + "attention.output.LayerNorm.weight", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.attn_ln_b, p + "attention.output.LayerNorm.bias", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.w_in, p + "intermediate.dense.weight", E, hp.n_ff, false));
    TROUPE_RETURN_IF_ERROR(bind(L.b_in, p + "intermediate.dense.bias", hp.n_ff, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.w_out, p + "output.dense.weight", hp.n_ff, E, false));
    TROUPE_RETURN_IF_ERROR(bind(L.b_out, p + "output.dense.bias", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.out_ln_w, p + "output.LayerNorm.weight", E, 1, true));
    TROUPE_RETURN_IF_ERROR(bind(L.out_ln_b, p + "output.LayerNorm.bias", E, 1, true));
    for (const WeightTensor* t : {L.wq, L.wk, L.wv, L.wo, L.w_in, L.w_out}) bytes += t->nbytes;
    m->layers_.push_back(L);
  }
  m->info_.architecture = source.architecture();
  m->info_.vocab_size = hp.n_vocab;
  m->info_.context_length = hp.n_pos;
  m->info_.num_layers = static_cast<int>(hp.n_layer);
  m->info_.num_heads = static_cast<int>(hp.n_head);
  m->info_.num_kv_heads = static_cast<int>(hp.n_head);
  m->info_.head_dim = static_cast<int>(hp.head_dim);
  m->info_.hidden_size = E;
  m->info_.weight_bytes = bytes;
  DeviceAllocator& mem = *context.allocator;
  const int64_t T = context.max_num_batched_tokens;
  for (auto* buf : {&m->x_, &m->tmp_, &m->q_, &m->k_, &m->v_, &m->attn_}) TROUPE_RETURN_IF_ERROR(buf->allocate(mem, T * E));
  TROUPE_RETURN_IF_ERROR(m->ff_.allocate(mem, T * hp.n_ff));
  TROUPE_RETURN_IF_ERROR(m->type_row_.allocate(mem, E));
  const int32_t type0 = 0;
  context.ops->embedding(*m->type_, &type0, 1, m->type_row_.data());
  TROUPE_LOG_INFO("bert model: {} layers, hidden {}, heads {}, ffn {}, vocab {}, positions {}", hp.n_layer, E,
                  hp.n_head, hp.n_ff, hp.n_vocab, hp.n_pos);
  return std::unique_ptr<Model>(std::move(m));
}

Status BertModel::validate(const ForwardBatch& b) const {
  const int64_t T = b.num_tokens();
  const int64_t S = b.num_seqs();
  if (T <= 0) return invalid_argument("forward batch has no tokens");
  if (T > ctx_.max_num_batched_tokens)
    return invalid_argument("forward batch has " + std::to_string(T) + " tokens, more than max_num_batched_tokens " +
                            std::to_string(ctx_.max_num_batched_tokens));
  if (static_cast<int64_t>(b.positions.size()) != T || S <= 0 ||
      static_cast<int64_t>(b.query_start.size()) != S + 1 || b.query_start.front() != 0 || b.query_start.back() != T)
    return invalid_argument("forward batch: positions or query_start are inconsistent");
  for (int64_t s = 0; s < S; ++s) {
    const int32_t len = b.query_start[s + 1] - b.query_start[s];
    // No KV cache: every sequence must be whole in this step.
    if (len <= 0 || b.seq_lens[s] != len)
      return invalid_argument("the BERT encoder needs each sequence whole in one step (no chunked prefill)");
  }
  for (int64_t t = 0; t < T; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= hp_.n_vocab)
      return out_of_range("token id " + std::to_string(b.token_ids[t]) + " is outside the vocabulary of " +
                          std::to_string(hp_.n_vocab));
    if (b.positions[t] < 0 || b.positions[t] >= hp_.n_pos)
      return out_of_range("position " + std::to_string(b.positions[t]) + " is past the model's " +
                          std::to_string(hp_.n_pos) + " positions");
  }
  return {};
}

Status BertModel::forward(const ForwardBatch&, float*) {
  return not_supported("model " + info_.architecture +
                       " is an encoder: it gives embeddings, not text (run it as a pooling model)");
}

Status BertModel::forward_hidden(const ForwardBatch& b, float* hidden) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  Ops& ops = *ctx_.ops;
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  const int H = static_cast<int>(hp_.n_head), D = static_cast<int>(hp_.head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // Embeddings: word + position + token type 0, then LayerNorm.
  ops.embedding(*word_, b.token_ids.data(), T, tmp_.data());
  ops.embedding(*pos_, b.positions.data(), T, q_.data());
  ops.add_inplace(tmp_.data(), q_.data(), T * E);
  ops.add_bias(tmp_.data(), type_row_.data(), T, E);
  ops.layer_norm(tmp_.data(), f32(emb_ln_w_), f32(emb_ln_b_), T, E, hp_.eps, x_.data());
  for (const BertLayer& L : layers_) {
    ops.matmul(*L.wq, x_.data(), T, q_.data());
    ops.add_bias(q_.data(), f32(L.bq), T, E);
    ops.matmul(*L.wk, x_.data(), T, k_.data());
    ops.add_bias(k_.data(), f32(L.bk), T, E);
    ops.matmul(*L.wv, x_.data(), T, v_.data());
    ops.add_bias(v_.data(), f32(L.bv), T, E);
    ops.dense_attention(q_.data(), k_.data(), v_.data(), attn_.data(), b.query_start.data(), b.num_seqs(), H, D,
                        scale, /*causal=*/false);
    ops.matmul(*L.wo, attn_.data(), T, tmp_.data());
    ops.add_bias(tmp_.data(), f32(L.bo), T, E);
    ops.add_inplace(tmp_.data(), x_.data(), T * E);
    ops.layer_norm(tmp_.data(), f32(L.attn_ln_w), f32(L.attn_ln_b), T, E, hp_.eps, x_.data());
    ops.matmul(*L.w_in, x_.data(), T, ff_.data());
    ops.add_bias(ff_.data(), f32(L.b_in), T, hp_.n_ff);
    ops.gelu(ff_.data(), T * hp_.n_ff, ff_.data());
    ops.matmul(*L.w_out, ff_.data(), T, tmp_.data());
    ops.add_bias(tmp_.data(), f32(L.b_out), T, E);
    ops.add_inplace(tmp_.data(), x_.data(), T * E);
    ops.layer_norm(tmp_.data(), f32(L.out_ln_w), f32(L.out_ln_b), T, E, hp_.eps, x_.data());
  }
  return ctx_.allocator->copy(hidden, x_.data(), T * E * static_cast<int64_t>(sizeof(float)),
                              CopyKind::device_to_device);
}

}  // namespace troupe::models
