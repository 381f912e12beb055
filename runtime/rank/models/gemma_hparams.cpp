#include "runtime/rank/models/gemma_hparams.hpp"

#include <cmath>
#include <string>

#include "runtime/rank/models/llama_hparams.hpp"
#include "troupe/dtype.hpp"

namespace troupe::models {
namespace {

Result<int64_t> required_int(const ModelSource& src, const std::string& key, int64_t min_value) {
  auto v = src.get_int(key);
  if (!v) return invalid_argument("model metadata lacks the integer key '" + key + "'");
  if (*v < min_value || *v > (int64_t{1} << 31))
    return invalid_argument("model metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
  return *v;
}

Result<float> positive_float(const ModelSource& src, const std::string& key, double fallback) {
  const double v = src.get_float(key).value_or(fallback);
  if (!(v > 0) || !std::isfinite(v)) return invalid_argument("model metadata: '" + key + "' must be a positive number");
  return static_cast<float>(v);
}

}  // namespace

Result<GemmaHParams> read_gemma_hparams(const ModelSource& source) {
  GemmaHParams hp;
  hp.arch = source.architecture();
  if (hp.arch != "gemma2" && hp.arch != "gemma3")
    return invalid_argument("the gemma model reads gemma2 and gemma3 files, not '" + hp.arch + "'");
  const bool g2 = hp.arch == "gemma2";
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
  hp.head_dim = static_cast<int>(source.get_int(p + "attention.key_length").value_or(hp.n_embd / hp.n_head));
  const int64_t v_dim = source.get_int(p + "attention.value_length").value_or(hp.head_dim);
  if (hp.head_dim <= 0 || hp.head_dim > 256 || hp.head_dim % 2 != 0 || v_dim != hp.head_dim)
    return invalid_argument("model metadata: head dimension " + std::to_string(hp.head_dim) + " (values " +
                            std::to_string(v_dim) + ") is unsupported (even, at most 256, keys and values alike)");
  if (auto rope_dim = source.get_int(p + "rope.dimension_count"); rope_dim && *rope_dim != hp.head_dim)
    return not_supported("partial rotary embeddings (rope.dimension_count " + std::to_string(*rope_dim) +
                         " != head dim " + std::to_string(hp.head_dim) + ") are not supported");
  hp.n_ctx_train = source.get_int(p + "context_length").value_or(8192);
  if (hp.n_ctx_train <= 0) return invalid_argument("model metadata: context_length must be positive");
  auto eps = positive_float(source, p + "attention.layer_norm_rms_epsilon", 1e-6);
  if (!eps.ok()) return eps.status();
  hp.rms_eps = *eps;
  auto theta = positive_float(source, p + "rope.freq_base", 10000.0);
  if (!theta.ok()) return theta.status();
  hp.rope_theta = *theta;
  // gemma2's local layers default to the global base, gemma3's to 10000 (llama.cpp's defaults).
  auto theta_local = positive_float(source, p + "rope.freq_base_swa", g2 ? hp.rope_theta : 10000.0);
  if (!theta_local.ok()) return theta_local.status();
  hp.rope_theta_local = *theta_local;
  if (auto scaling = source.get_string(p + "rope.scaling.type"); scaling && *scaling != "none")
    return not_supported("rope scaling '" + *scaling + "' of the gemma model's global layers is not supported yet");

  // Local/global layers: every layer whose index mod the pattern is below pattern - 1 is
  // windowed (gemma2: 2, even layers; gemma3: 6, five local then one global).
  const int64_t window = source.get_int(p + "attention.sliding_window").value_or(g2 ? 4096 : 0);
  if (window < 0 || window > (int64_t{1} << 30))
    return invalid_argument("model metadata: attention.sliding_window " + std::to_string(window) + " is out of range");
  hp.sliding_window = static_cast<int32_t>(window);
  const int64_t pattern = source.get_int(p + "attention.sliding_window_pattern").value_or(g2 ? 2 : 6);
  if (pattern < 0) return invalid_argument("model metadata: attention.sliding_window_pattern must not be negative");
  hp.is_local.assign(static_cast<size_t>(hp.n_layer), false);
  if (hp.sliding_window > 0)
    for (int l = 0; l < hp.n_layer; ++l) hp.is_local[static_cast<size_t>(l)] = pattern == 0 || l % pattern < pattern - 1;

  // The 27B models scale queries by 1/sqrt(n_embd / n_head), the others by 1/sqrt(head_dim).
  const bool is_27b = (g2 && hp.n_layer == 46) || (!g2 && hp.n_layer == 62);
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? hp.n_embd / hp.n_head : hp.head_dim));
  // A Hugging Face folder says it (config.json query_pre_attn_scalar); GGUF files do not.
  if (auto scalar = source.get_float(p + "attention.query_pre_attn_scalar")) {
    if (!(*scalar > 0) || !std::isfinite(*scalar))
      return invalid_argument("model metadata: attention.query_pre_attn_scalar must be a positive number");
    hp.attn_scale = static_cast<float>(1.0 / std::sqrt(*scalar));
  }
  if (g2) {
    auto attn_cap = positive_float(source, p + "attn_logit_softcapping", 50.0);
    if (!attn_cap.ok()) return attn_cap.status();
    auto final_cap = positive_float(source, p + "final_logit_softcapping", 30.0);
    if (!final_cap.ok()) return final_cap.status();
    hp.attn_softcap = *attn_cap;
    hp.final_softcap = *final_cap;
  } else {
    const double final_cap = source.get_float(p + "final_logit_softcapping").value_or(0.0);
    if (final_cap < 0 || !std::isfinite(final_cap))
      return invalid_argument("model metadata: final_logit_softcapping must not be negative");
    hp.final_softcap = static_cast<float>(final_cap);
    hp.qk_norm = true;
  }

  const WeightTensor* emb = source.tensor("token_embd.weight");
  if (!emb) return not_found("model tensor 'token_embd.weight' is missing");
  hp.n_vocab = emb->ne[1];
  if (hp.n_vocab <= 0 || emb->n_dims != 2)
    return invalid_argument("model tensor 'token_embd.weight' must have 2 dimensions");
  auto n_ff = required_int(source, p + "feed_forward_length", 1);
  if (!n_ff.ok()) return n_ff.status();
  hp.n_ff = *n_ff;
  return hp;
}

Result<GemmaWeights> bind_gemma_weights(const ModelSource& source, const GemmaHParams& hp) {
  GemmaWeights w;
  const int64_t q_dim = int64_t{hp.n_head} * hp.head_dim;
  const int64_t kv_dim = int64_t{hp.n_head_kv} * hp.head_dim;
  uint64_t bytes = 0;
  auto bind = [&](const std::string& name, int64_t ne0, int64_t ne1, bool f32_only,
                  const WeightTensor** out) -> Status {
    auto t = expect_weight(source, name, ne0, ne1, f32_only);
    if (!t.ok()) return t.status();
    *out = *t;
    bytes += (*t)->nbytes;
    return {};
  };
  TROUPE_RETURN_IF_ERROR(bind("token_embd.weight", hp.n_embd, hp.n_vocab, false, &w.token_embd));
  bytes -= w.token_embd->nbytes;  // one row per token is read, not the table
  bytes += static_cast<uint64_t>(row_bytes(w.token_embd->type, hp.n_embd));
  TROUPE_RETURN_IF_ERROR(bind("output_norm.weight", hp.n_embd, 0, true, &w.output_norm));
  // gemma2 always ties the output to the embedding (llama.cpp ignores an output tensor).
  if (hp.arch == "gemma3" && source.tensor("output.weight")) {
    TROUPE_RETURN_IF_ERROR(bind("output.weight", hp.n_embd, hp.n_vocab, false, &w.output));
  } else {
    w.output = w.token_embd;
    bytes += w.token_embd->nbytes;
  }
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int l = 0; l < hp.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto& L = w.layers[static_cast<size_t>(l)];
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_norm.weight", hp.n_embd, 0, true, &L.attn_norm));
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_q.weight", hp.n_embd, q_dim, false, &L.wq));
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_k.weight", hp.n_embd, kv_dim, false, &L.wk));
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_v.weight", hp.n_embd, kv_dim, false, &L.wv));
    TROUPE_RETURN_IF_ERROR(bind(b + "attn_output.weight", q_dim, hp.n_embd, false, &L.wo));
    if (hp.qk_norm) {
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_q_norm.weight", hp.head_dim, 0, true, &L.q_norm));
      TROUPE_RETURN_IF_ERROR(bind(b + "attn_k_norm.weight", hp.head_dim, 0, true, &L.k_norm));
    }
    TROUPE_RETURN_IF_ERROR(bind(b + "post_attention_norm.weight", hp.n_embd, 0, true, &L.post_attn_norm));
    TROUPE_RETURN_IF_ERROR(bind(b + "ffn_norm.weight", hp.n_embd, 0, true, &L.ffn_norm));
    TROUPE_RETURN_IF_ERROR(bind(b + "ffn_gate.weight", hp.n_embd, hp.n_ff, false, &L.ffn_gate));
    TROUPE_RETURN_IF_ERROR(bind(b + "ffn_up.weight", hp.n_embd, hp.n_ff, false, &L.ffn_up));
    TROUPE_RETURN_IF_ERROR(bind(b + "ffn_down.weight", hp.n_ff, hp.n_embd, false, &L.ffn_down));
    TROUPE_RETURN_IF_ERROR(bind(b + "post_ffw_norm.weight", hp.n_embd, 0, true, &L.post_ffn_norm));
  }
  w.bytes_per_token = bytes;
  return w;
}

Status check_gemma_weight_types(const GemmaWeights& w, const Ops& ops) {
  std::vector<const WeightTensor*> matrices = {w.token_embd, w.output};
  for (const auto& L : w.layers)
    matrices.insert(matrices.end(), {L.wq, L.wk, L.wv, L.wo, L.ffn_gate, L.ffn_up, L.ffn_down});
  for (const WeightTensor* t : matrices)
    if (Status s = ops.check_weight_type(t->type); !s.ok())
      return Status(s.code(), "model tensor '" + t->name + "': " + s.message());
  return {};
}

}  // namespace troupe::models
