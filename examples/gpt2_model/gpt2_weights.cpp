#include "gpt2_weights.hpp"

#include <string>

#include "troupe/dtype.hpp"

namespace gpt2 {
namespace {

using troupe::Result;
using troupe::Status;
using troupe::WeightTensor;

Result<int64_t> required_int(const troupe::ModelSource& s, const std::string& key) {
  auto v = s.get_int(key);
  if (!v) return troupe::invalid_argument("gpt2: metadata key '" + key + "' is missing or not an integer");
  if (*v <= 0 || *v > (int64_t{1} << 24))
    return troupe::invalid_argument("gpt2: metadata key '" + key + "' is " + std::to_string(*v) + ", out of range");
  return *v;
}

std::string shape_text(int64_t ne0, int64_t ne1) {
  std::string s = "[";
  s += std::to_string(ne0);
  s += ", ";
  s += std::to_string(ne1);
  s += "]";
  return s;
}

// A view of part of a tensor: rows [r0, r1) of a matrix, or elements [r0, r1) of a vector
// (the q, k and v parts of GPT-2's fused attn_qkv weight and bias).
WeightTensor part_of(const WeightTensor& t, int64_t r0, int64_t r1, const char* part) {
  WeightTensor v = t;
  v.name = t.name + ":" + part;
  if (t.n_dims <= 1 || t.rows() == 1) {  // a vector: f32 elements
    v.data = static_cast<const float*>(t.data) + r0;
    v.ne[0] = r1 - r0;
    v.nbytes = static_cast<uint64_t>((r1 - r0) * static_cast<int64_t>(sizeof(float)));
    return v;
  }
  const int64_t stride = t.row_stride > 0 ? t.row_stride : troupe::row_bytes(t.type, t.ne[0]);
  v.data = static_cast<const uint8_t*>(t.data) + r0 * stride;
  v.ne[1] = r1 - r0;
  v.nbytes = static_cast<uint64_t>(stride * (r1 - r0));
  return v;
}

}  // namespace

Result<HParams> read_hparams(const troupe::ModelSource& source) {
  HParams hp;
  const std::pair<const char*, int64_t*> ints[] = {{"gpt2.context_length", &hp.n_ctx},
                                                   {"gpt2.embedding_length", &hp.n_embd},
                                                   {"gpt2.feed_forward_length", &hp.n_ff}};
  for (auto [key, field] : ints) {
    auto v = required_int(source, key);
    if (!v.ok()) return v.status();
    *field = *v;
  }
  auto layers = required_int(source, "gpt2.block_count");
  if (!layers.ok()) return layers.status();
  auto heads = required_int(source, "gpt2.attention.head_count");
  if (!heads.ok()) return heads.status();
  hp.n_layer = static_cast<int>(*layers);
  hp.n_head = static_cast<int>(*heads);
  if (auto kv = source.get_int("gpt2.attention.head_count_kv"); kv && *kv != hp.n_head)
    return troupe::not_supported("gpt2: attention.head_count_kv " + std::to_string(*kv) + " differs from head_count " +
                                 std::to_string(hp.n_head) + " (GPT-2 has no grouped-query attention)");
  if (hp.n_embd % hp.n_head != 0)
    return troupe::invalid_argument("gpt2: embedding_length " + std::to_string(hp.n_embd) +
                                    " is not a multiple of attention.head_count " + std::to_string(hp.n_head));
  hp.head_dim = static_cast<int>(hp.n_embd / hp.n_head);
  auto eps = source.get_float("gpt2.attention.layer_norm_epsilon");
  if (!eps) return troupe::invalid_argument("gpt2: metadata key 'gpt2.attention.layer_norm_epsilon' is missing");
  if (!(*eps > 0.0 && *eps < 1.0))
    return troupe::invalid_argument("gpt2: attention.layer_norm_epsilon " + std::to_string(*eps) + " is out of range");
  hp.norm_eps = static_cast<float>(*eps);
  const WeightTensor* embd = source.tensor("token_embd.weight");
  if (embd == nullptr) return troupe::not_found("gpt2: model tensor 'token_embd.weight' is missing");
  hp.n_vocab = embd->rows();
  return hp;
}

Result<Weights> bind_weights(const troupe::ModelSource& source, const HParams& hp, const troupe::Ops& ops) {
  Weights w;
  uint64_t bytes = 0;
  // The tensor `name` with ne = {ne0, ne1}; a matrix of a type the ops compute, or an f32
  // vector (ne1 == 0).
  auto bind = [&](const std::string& name, int64_t ne0, int64_t ne1, const WeightTensor** out) -> Status {
    const WeightTensor* t = source.tensor(name);
    if (t == nullptr) return troupe::not_found("gpt2: model tensor '" + name + "' is missing");
    const bool vector = ne1 == 0;
    if (t->ne[0] != ne0 || t->rows() != (vector ? 1 : ne1))
      return troupe::invalid_argument("gpt2: model tensor '" + name + "' has shape " +
                                      shape_text(t->ne[0], t->rows()) + ", expected " +
                                      shape_text(ne0, vector ? 1 : ne1));
    if (vector && t->type != troupe::DType::f32)
      return troupe::not_supported("gpt2: model tensor '" + name + "' is " + std::string(troupe::to_string(t->type)) +
                                   "; norms and biases must be f32");
    if (!vector) {
      if (Status s = ops.check_weight_type(t->type); !s.ok())
        return Status(s.code(), "gpt2: model tensor '" + name + "': " + s.message());
      bytes += t->nbytes;
    }
    *out = t;
    return {};
  };
  const int64_t E = hp.n_embd;
  TROUPE_RETURN_IF_ERROR(bind("token_embd.weight", E, hp.n_vocab, &w.token_embd));
  TROUPE_RETURN_IF_ERROR(bind("position_embd.weight", E, hp.n_ctx, &w.position_embd));
  // One row of each embedding is read per token, not the tables.
  bytes -= w.token_embd->nbytes + w.position_embd->nbytes;
  bytes += static_cast<uint64_t>(troupe::row_bytes(w.token_embd->type, E) +
                                 troupe::row_bytes(w.position_embd->type, E));
  TROUPE_RETURN_IF_ERROR(bind("output_norm.weight", E, 0, &w.output_norm));
  TROUPE_RETURN_IF_ERROR(bind("output_norm.bias", E, 0, &w.output_norm_b));
  if (source.tensor("output.weight") != nullptr) {
    TROUPE_RETURN_IF_ERROR(bind("output.weight", E, hp.n_vocab, &w.output));
  } else {
    w.output = w.token_embd;  // tied, as llama.cpp loads a file without output.weight
    bytes += w.token_embd->nbytes;
  }
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int l = 0; l < hp.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const WeightTensor *qkv = nullptr, *qkv_b = nullptr;
    TROUPE_RETURN_IF_ERROR(bind(p + "attn_norm.weight", E, 0, &L.attn_norm));
    TROUPE_RETURN_IF_ERROR(bind(p + "attn_norm.bias", E, 0, &L.attn_norm_b));
    TROUPE_RETURN_IF_ERROR(bind(p + "attn_qkv.weight", E, 3 * E, &qkv));
    TROUPE_RETURN_IF_ERROR(bind(p + "attn_qkv.bias", 3 * E, 0, &qkv_b));
    TROUPE_RETURN_IF_ERROR(bind(p + "attn_output.weight", E, E, &L.wo));
    TROUPE_RETURN_IF_ERROR(bind(p + "attn_output.bias", E, 0, &L.wo_b));
    TROUPE_RETURN_IF_ERROR(bind(p + "ffn_norm.weight", E, 0, &L.ffn_norm));
    TROUPE_RETURN_IF_ERROR(bind(p + "ffn_norm.bias", E, 0, &L.ffn_norm_b));
    TROUPE_RETURN_IF_ERROR(bind(p + "ffn_up.weight", E, hp.n_ff, &L.ffn_up));
    TROUPE_RETURN_IF_ERROR(bind(p + "ffn_up.bias", hp.n_ff, 0, &L.ffn_up_b));
    TROUPE_RETURN_IF_ERROR(bind(p + "ffn_down.weight", hp.n_ff, E, &L.ffn_down));
    TROUPE_RETURN_IF_ERROR(bind(p + "ffn_down.bias", E, 0, &L.ffn_down_b));
    // q, k, v: rows [0, E), [E, 2E), [2E, 3E) of the fused weight, the same spans of its bias.
    L.wq = part_of(*qkv, 0, E, "q");
    L.wk = part_of(*qkv, E, 2 * E, "k");
    L.wv = part_of(*qkv, 2 * E, 3 * E, "v");
    L.bq = part_of(*qkv_b, 0, E, "q");
    L.bk = part_of(*qkv_b, E, 2 * E, "k");
    L.bv = part_of(*qkv_b, 2 * E, 3 * E, "v");
  }
  w.bytes_per_token = bytes;
  return w;
}

}  // namespace gpt2
