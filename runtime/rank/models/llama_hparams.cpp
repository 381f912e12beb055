#include "runtime/rank/models/llama_hparams.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "runtime/rank/models/decoder_arch.hpp"
#include "troupe/dtype.hpp"

namespace troupe::models {
namespace {

std::string shape_str(const WeightTensor& t) {
  std::string s = "{";
  for (int i = 0; i < std::max(1, t.n_dims); ++i) {
    if (i) s += ", ";
    s += std::to_string(t.ne[i]);
  }
  s += "}";
  return s;
}

Result<int64_t> required_int(const ModelSource& src, const std::string& key, int64_t min_value) {
  auto v = src.get_int(key);
  if (!v) return invalid_argument("model metadata lacks the integer key '" + key + "'");
  if (*v < min_value || *v > (int64_t{1} << 31))
    return invalid_argument("model metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
  return *v;
}

// gpt-oss: `attention.sliding_window` keys on the layers l with l % pattern < pattern - 1,
// pattern = `attention.sliding_window_pattern` (llama.cpp's default 2: the even layers).
Status read_swa_pattern(const ModelSource& src, const std::string& p, LlamaHParams* hp) {
  const int64_t window = src.get_int(p + "attention.sliding_window").value_or(0);
  const int64_t pattern = src.get_int(p + "attention.sliding_window_pattern").value_or(2);
  if (window < 0 || window > (int64_t{1} << 30))
    return invalid_argument("model metadata: attention.sliding_window " + std::to_string(window) + " is out of range");
  if (pattern < 1 || pattern > 1024)
    return invalid_argument("model metadata: attention.sliding_window_pattern " + std::to_string(pattern) +
                            " is out of range");
  hp->swa_window = static_cast<int32_t>(window);
  hp->swa_layers.assign(static_cast<size_t>(hp->n_layer), false);
  for (int l = 0; l < hp->n_layer && window > 0; ++l) hp->swa_layers[static_cast<size_t>(l)] = l % pattern < pattern - 1;
  return {};
}

}  // namespace

Result<const WeightTensor*> expect_weight(const ModelSource& src, const std::string& name, int64_t ne0, int64_t ne1,
                                          bool f32_only) {
  const WeightTensor* t = src.tensor(name);
  if (!t) return not_found("model tensor '" + name + "' is missing");
  bool shape_ok = t->ne[0] == ne0 && t->ne[2] == 1 && t->ne[3] == 1 && (ne1 > 0 ? t->ne[1] == ne1 : t->ne[1] == 1);
  if (!shape_ok) {
    std::string want = "{";
    want += std::to_string(ne0);
    if (ne1 > 0) {
      want += ", ";
      want += std::to_string(ne1);
    }
    want += "}";
    return invalid_argument("model tensor '" + name + "' has shape " + shape_str(*t) + " but the hyperparameters need " +
                            want);
  }
  if (!dtype_traits(static_cast<uint32_t>(t->type)))
    return not_supported("model tensor '" + name + "' has an unsupported type id " +
                         std::to_string(static_cast<uint32_t>(t->type)));
  if (f32_only && t->type != DType::f32)
    return not_supported("model tensor '" + name + "' must be f32, found " + std::string(to_string(t->type)));
  const int64_t rb = row_bytes(t->type, t->ne[0]);
  if (rb < 0)
    return data_loss("model tensor '" + name + "': row of " + std::to_string(t->ne[0]) + " is not a whole number of " +
                     std::string(to_string(t->type)) + " blocks");
  if (static_cast<uint64_t>(rb) * static_cast<uint64_t>(t->rows()) != t->nbytes || t->data == nullptr)
    return data_loss("model tensor '" + name + "' holds " + std::to_string(t->nbytes) + " bytes, its shape needs " +
                     std::to_string(rb * t->rows()));
  return t;
}

Result<LlamaHParams> read_llama_hparams(const ModelSource& source, int64_t engine_context) {
  LlamaHParams hp;
  hp.arch = source.architecture();
  if (hp.arch.empty()) return invalid_argument("model file has no general.architecture");
  const DecoderArch* traits = find_decoder_arch(hp.arch);
  if (traits == nullptr)
    return not_supported("model architecture '" + hp.arch + "' is not supported by the llama-style decoder; supported: " +
                         decoder_arch_names());
  hp.rope_neox = traits->rope_neox;
  // A Hugging Face folder keeps llama's Q/K rows unpermuted (rotary halves): its source says so.
  if (auto neox = source.get_int("troupe.rope.neox")) hp.rope_neox = *neox != 0;
  hp.qk_norm = traits->qk_norm || traits->qk_norm_full;
  hp.qk_norm_full = traits->qk_norm_full;
  hp.fused_gate_up = traits->fused_gate_up;
  hp.attn_sinks = traits->attn_sinks;
  hp.attn_out_bias = traits->attn_out_bias;
  hp.ffn_norm = std::string(traits->ffn_norm);
  const std::string p = hp.arch + ".";
  auto n_embd = required_int(source, p + "embedding_length", 1);
  if (!n_embd.ok()) return n_embd.status();
  auto n_layer = required_int(source, p + "block_count", 1);
  if (!n_layer.ok()) return n_layer.status();
  auto n_head = required_int(source, p + "attention.head_count", 1);
  if (!n_head.ok()) return n_head.status();
  hp.n_embd = *n_embd;
  hp.n_layer = static_cast<int>(*n_layer);
  hp.n_head = static_cast<int>(*n_head);
  hp.n_head_kv = static_cast<int>(source.get_int(p + "attention.head_count_kv").value_or(hp.n_head));
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0)
    return invalid_argument("model metadata: head_count " + std::to_string(hp.n_head) +
                            " is not a multiple of head_count_kv " + std::to_string(hp.n_head_kv));
  const auto key_length = source.get_int(p + "attention.key_length");
  if (!key_length && hp.n_embd % hp.n_head != 0)
    return invalid_argument("model metadata: embedding_length " + std::to_string(hp.n_embd) +
                            " is not a multiple of head_count " + std::to_string(hp.n_head));
  hp.head_dim = static_cast<int>(key_length.value_or(hp.n_embd / hp.n_head));
  if (hp.head_dim <= 0 || hp.head_dim > 256 || hp.head_dim % 2 != 0)
    return invalid_argument("model metadata: head dimension " + std::to_string(hp.head_dim) +
                            " is unsupported (even, at most 256)");
  hp.rope_dim = static_cast<int>(source.get_int(p + "rope.dimension_count").value_or(hp.head_dim));
  if (hp.rope_dim != hp.head_dim)
    return not_supported("partial rotary embeddings (rope.dimension_count " + std::to_string(hp.rope_dim) +
                         " != head dim " + std::to_string(hp.head_dim) + ") are not supported");
  hp.n_ctx_train = source.get_int(p + "context_length").value_or(2048);
  if (hp.n_ctx_train <= 0) return invalid_argument("model metadata: context_length must be positive");
  hp.rope_theta = static_cast<float>(source.get_float(p + "rope.freq_base").value_or(10000.0));
  hp.rms_eps = static_cast<float>(source.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(hp.rope_theta > 0) || !std::isfinite(hp.rope_theta))
    return invalid_argument("model metadata: rope.freq_base must be a positive number");
  if (!(hp.rms_eps > 0) || !std::isfinite(hp.rms_eps))
    return invalid_argument("model metadata: layer_norm_rms_epsilon must be a positive number");
  if (traits->sliding_window) {
    const int64_t window = source.get_int(p + "attention.sliding_window").value_or(0);
    if (window < 0 || window > (int64_t{1} << 30))
      return invalid_argument("model metadata: attention.sliding_window " + std::to_string(window) + " is out of range");
    hp.sliding_window = static_cast<int32_t>(window);
  }
  if (traits->swa_pattern) TROUPE_RETURN_IF_ERROR(read_swa_pattern(source, p, &hp));
  RopeScalingQuery rq;
  rq.arch = hp.arch;
  rq.rope_dim = hp.rope_dim;
  rq.theta = hp.rope_theta;
  rq.reads_rope_freqs = traits->rope_freqs;
  rq.reads_long_short_factors = traits->long_short_factors;
  rq.n_ctx_train = hp.n_ctx_train;
  rq.engine_context = engine_context;
  auto scaling = read_rope_scaling(source, rq);
  if (!scaling.ok()) return scaling.status();
  hp.rope_scaling = std::move(*scaling);

  const WeightTensor* emb = source.tensor("token_embd.weight");
  if (!emb) return not_found("model tensor 'token_embd.weight' is missing");
  hp.n_vocab = emb->ne[1];
  if (hp.n_vocab <= 0 || emb->n_dims != 2)
    return invalid_argument("model tensor 'token_embd.weight' has shape " + shape_str(*emb) + ", expected 2 dims");
  if (auto n_ff = source.get_int(p + "feed_forward_length")) {
    hp.n_ff = *n_ff;
  } else if (const WeightTensor* g = source.tensor("blk.0.ffn_gate.weight"); g && !hp.fused_gate_up) {
    hp.n_ff = g->ne[1];
  } else if (const WeightTensor* u = source.tensor("blk.0.ffn_up.weight"); u && hp.fused_gate_up) {
    hp.n_ff = u->ne[1] / 2;
  }
  auto moe = read_moe_hparams(source, *traits, hp.arch, hp.n_ff);
  if (!moe.ok()) return moe.status();
  hp.moe = *moe;
  if (hp.n_ff <= 0 && !hp.moe.active()) return invalid_argument("model metadata lacks '" + p + "feed_forward_length'");
  return hp;
}

Result<LlamaWeights> bind_llama_weights(const ModelSource& source, const LlamaHParams& hp) {
  LlamaWeights w;
  const int64_t q_dim = int64_t{hp.n_head} * hp.head_dim;
  const int64_t kv_dim = int64_t{hp.n_head_kv} * hp.head_dim;
  uint64_t bytes = 0;
  auto bind = [&](const std::string& name, int64_t ne0, int64_t ne1, bool f32_only,
                  const WeightTensor** out) -> Status {
    auto t = expect_weight(source, name, ne0, ne1, f32_only);
    if (!t.ok() && t.status().code() == StatusCode::not_found)
      return not_found(t.status().message() + " (architecture '" + hp.arch + "')");
    if (!t.ok()) return t.status();
    *out = *t;
    bytes += (*t)->nbytes;
    return {};
  };
  TROUPE_RETURN_IF_ERROR(bind("token_embd.weight", hp.n_embd, hp.n_vocab, false, &w.token_embd));
  bytes -= w.token_embd->nbytes;  // one row per token is read, not the table
  bytes += static_cast<uint64_t>(row_bytes(w.token_embd->type, hp.n_embd));
  TROUPE_RETURN_IF_ERROR(bind("output_norm.weight", hp.n_embd, 0, true, &w.output_norm));
  if (source.tensor("output.weight")) {
    TROUPE_RETURN_IF_ERROR(bind("output.weight", hp.n_embd, hp.n_vocab, false, &w.output));
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
    bytes += w.token_embd->nbytes;
  }
  // Rows [r0, r1) of a fused matrix as a tensor of its own (llama.cpp's views of wqkv and
  // of phi3's ffn_up), named after the part.
  auto rows_of = [&w](const WeightTensor& t, int64_t r0, int64_t r1, const std::string& name) {
    auto v = std::make_unique<WeightTensor>(t);
    const int64_t stride = t.row_stride > 0 ? t.row_stride : row_bytes(t.type, t.ne[0]);
    v->name = name;
    v->data = static_cast<const uint8_t*>(t.data) + r0 * stride;
    v->ne[1] = r1 - r0;
    v->nbytes = static_cast<uint64_t>(stride * (r1 - r0));
    w.views.push_back(std::move(v));
    return w.views.back().get();
  };
  w.layers.resize(hp.n_layer);
  for (int l = 0; l < hp.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto& L = w.layers[l];
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_norm.weight", hp.n_embd, 0, true, &L.attn_norm));
    if (source.tensor(b + "attn_qkv.weight") != nullptr) {
      const WeightTensor* qkv = nullptr;
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_qkv.weight", hp.n_embd, q_dim + 2 * kv_dim, false, &qkv));
      if (source.tensor(b + "attn_qkv.bias") != nullptr)
        return not_supported("model tensor '" + b + "attn_qkv.bias' (a fused attention bias) is not supported");
      L.wq = rows_of(*qkv, 0, q_dim, b + "attn_qkv.weight:q");
      L.wk = rows_of(*qkv, q_dim, q_dim + kv_dim, b + "attn_qkv.weight:k");
      L.wv = rows_of(*qkv, q_dim + kv_dim, q_dim + 2 * kv_dim, b + "attn_qkv.weight:v");
    } else {
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_q.weight", hp.n_embd, q_dim, false, &L.wq));
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_k.weight", hp.n_embd, kv_dim, false, &L.wk));
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_v.weight", hp.n_embd, kv_dim, false, &L.wv));
    }
    // Q/K/V biases are optional in every family, as llama.cpp loads them (qwen2 has them).
    const std::pair<const char*, int64_t> biases[] = {{"attn_q.bias", q_dim}, {"attn_k.bias", kv_dim},
                                                      {"attn_v.bias", kv_dim}};
    const WeightTensor** bias_out[] = {&L.bq, &L.bk, &L.bv};
    for (int j = 0; j < 3; ++j)
      if (source.tensor(b + biases[j].first) != nullptr)
        TROUPE_RETURN_IF_ERROR(bind(b + biases[j].first, biases[j].second, 0, true, bias_out[j]));
    if (hp.qk_norm) {  // per head ({head_dim}), or over the whole projection (olmoe)
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_q_norm.weight", hp.qk_norm_full ? q_dim : hp.head_dim, 0, true, &L.q_norm));
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_k_norm.weight", hp.qk_norm_full ? kv_dim : hp.head_dim, 0, true, &L.k_norm));
    }
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_output.weight", q_dim, hp.n_embd, false, &L.wo));
    if (hp.attn_out_bias) TROUPE_RETURN_IF_ERROR(bind(b + "attn_output.bias", hp.n_embd, 0, true, &L.bo));
    if (hp.attn_sinks) TROUPE_RETURN_IF_ERROR(bind(b + "attn_sinks.weight", hp.n_head, 0, true, &L.sinks));
    TROUPE_RETURN_IF_ERROR(bind(b + hp.ffn_norm + ".weight", hp.n_embd, 0, true, &L.ffn_norm));
    if (hp.moe.active()) {
      auto moe = bind_moe_layer(source, hp.moe, hp.arch, hp.n_embd, l);
      if (!moe.ok()) return moe.status();
      L.moe = std::move(*moe);
      // Each token reads the router and n_used experts.
      bytes += L.moe.router->nbytes + static_cast<uint64_t>(hp.moe.n_used) * L.moe.expert_bytes;
    } else if (hp.fused_gate_up) {
      // ggml_swiglu: silu of the first half of the rows (gate) times the second half (up).
      const WeightTensor* up = nullptr;
      TROUPE_RETURN_IF_ERROR(bind(b + "ffn_up.weight", hp.n_embd, 2 * hp.n_ff, false, &up));
      L.ffn_gate = rows_of(*up, 0, hp.n_ff, b + "ffn_up.weight:gate");
      L.ffn_up = rows_of(*up, hp.n_ff, 2 * hp.n_ff, b + "ffn_up.weight:up");
    } else {
      TROUPE_RETURN_IF_ERROR(bind(b + "ffn_gate.weight", hp.n_embd, hp.n_ff, false, &L.ffn_gate));
      TROUPE_RETURN_IF_ERROR(bind(b + "ffn_up.weight", hp.n_embd, hp.n_ff, false, &L.ffn_up));
    }
    if (!hp.moe.active()) TROUPE_RETURN_IF_ERROR(bind(b + "ffn_down.weight", hp.n_ff, hp.n_embd, false, &L.ffn_down));
    for (const char* extra : {"attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
      if (source.tensor(b + extra) != nullptr && !(hp.attn_out_bias && std::string(extra) == "attn_output.bias"))
        return not_supported("model tensor '" + b + extra + "' is not supported (architecture '" + hp.arch + "')");
  }
  if (source.tensor("output.bias") != nullptr)
    return not_supported("model tensor 'output.bias' is not supported (architecture '" + hp.arch + "')");
  w.bytes_per_token = bytes;
  return w;
}

Status check_llama_weight_types(const LlamaWeights& w, const Ops& ops) {
  std::vector<const WeightTensor*> matrices = {w.token_embd, w.output};
  for (const auto& L : w.layers) {
    matrices.insert(matrices.end(), {L.wq, L.wk, L.wv, L.wo, L.ffn_gate, L.ffn_up, L.ffn_down, L.moe.router});
    for (const auto* list : {&L.moe.gate, &L.moe.up, &L.moe.down})
      for (const WeightTensor& t : *list) matrices.push_back(&t);
  }
  for (const WeightTensor* t : matrices) {
    if (t == nullptr) continue;  // bind_llama_weights has already refused missing tensors
    if (Status s = ops.check_weight_type(t->type); !s.ok())
      return Status(s.code(), "model tensor '" + t->name + "': " + s.message());
  }
  return {};
}

}  // namespace troupe::models
