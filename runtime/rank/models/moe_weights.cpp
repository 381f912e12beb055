#include "runtime/rank/models/moe_weights.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "troupe/dtype.hpp"

namespace troupe::models {
namespace {

// More experts than any published model has (DeepSeek V3: 256; Qwen3-235B: 128).
constexpr int64_t kMaxExperts = 1024;

std::string dims_text(const int64_t* ne, size_t n) {
  std::string s = "{";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

// `t` has exactly the shape `want` (trailing dimensions 1), a known type (f32 when f32_only)
// and the bytes that shape needs; `why` says where the shape comes from.
Status check_tensor(const WeightTensor& t, std::initializer_list<int64_t> want, bool f32_only, const std::string& why) {
  int64_t w[4] = {1, 1, 1, 1};
  size_t i = 0;
  for (int64_t v : want) w[i++] = v;
  if (t.ne[0] != w[0] || t.ne[1] != w[1] || t.ne[2] != w[2] || t.ne[3] != w[3])
    return invalid_argument("model tensor '" + t.name + "' has shape " + dims_text(t.ne, std::max<size_t>(1, t.n_dims)) +
                            " but the hyperparameters need " + dims_text(w, want.size()) + " (" + why + ")");
  if (!dtype_traits(static_cast<uint32_t>(t.type)))
    return not_supported("model tensor '" + t.name + "' has an unsupported type id " +
                         std::to_string(static_cast<uint32_t>(t.type)));
  if (f32_only && t.type != DType::f32)
    return not_supported("model tensor '" + t.name + "' must be f32, found " + std::string(to_string(t.type)));
  const int64_t rb = row_bytes(t.type, t.ne[0]);
  if (rb < 0)
    return data_loss("model tensor '" + t.name + "': row of " + std::to_string(t.ne[0]) + " is not a whole number of " +
                     std::string(to_string(t.type)) + " blocks");
  if (t.data == nullptr || static_cast<uint64_t>(rb) * static_cast<uint64_t>(t.rows()) != t.nbytes)
    return data_loss("model tensor '" + t.name + "' holds " + std::to_string(t.nbytes) + " bytes, its shape needs " +
                     std::to_string(rb * t.rows()));
  return {};
}

Result<const WeightTensor*> required(const ModelSource& source, const std::string& name, const std::string& arch) {
  const WeightTensor* t = source.tensor(name);
  if (t == nullptr) return not_found("model tensor '" + name + "' is missing (architecture '" + arch + "')");
  return t;
}

// Expert e of a merged tensor {ne0, rows, n_expert} as a matrix of its own.
WeightTensor expert_matrix(const WeightTensor& t, int64_t e) {
  WeightTensor v = t;
  const int64_t stride = row_bytes(t.type, t.ne[0]);
  v.name = t.name + "[" + std::to_string(e) + "]";
  v.n_dims = 2;
  v.ne[2] = 1;
  v.row_stride = 0;
  v.data = static_cast<const uint8_t*>(t.data) + e * t.ne[1] * stride;
  v.nbytes = static_cast<uint64_t>(t.ne[1] * stride);
  return v;
}

// Expert e's vector of a merged f32 bias {n, n_expert}.
WeightTensor expert_vector(const WeightTensor& t, int64_t e) {
  WeightTensor v = t;
  v.name = t.name + "[" + std::to_string(e) + "]";
  v.n_dims = 1;
  v.ne[1] = 1;
  v.data = static_cast<const float*>(t.data) + e * t.ne[0];
  v.nbytes = static_cast<uint64_t>(t.ne[0]) * sizeof(float);
  return v;
}

// One kind of expert matrix (gate, up or down) of every expert: the merged tensor
// `<b>ffn_<kind>_exps.weight` {in, out, n_expert}, or one `<b>ffn_<kind>.<e>.weight` {in, out} each.
Status bind_experts(const ModelSource& source, const std::string& b, const char* kind, int64_t in, int64_t out,
                    int n_expert, const std::string& arch, std::vector<WeightTensor>* views) {
  const std::string merged = b + "ffn_" + kind + "_exps.weight";
  const std::string why = "expert_count " + std::to_string(n_expert);
  views->clear();
  if (const WeightTensor* t = source.tensor(merged)) {
    TROUPE_RETURN_IF_ERROR(check_tensor(*t, {in, out, n_expert}, false, why));
    for (int e = 0; e < n_expert; ++e) views->push_back(expert_matrix(*t, e));
    return {};
  }
  const std::string first = b + "ffn_" + kind + ".0.weight";
  if (source.tensor(first) == nullptr)
    return not_found("model tensor '" + merged + "' is missing (architecture '" + arch + "', " + why +
                     "; nor are the experts stored one by one as '" + first + "')");
  for (int e = 0; e < n_expert; ++e) {
    auto t = required(source, b + "ffn_" + kind + "." + std::to_string(e) + ".weight", arch);
    if (!t.ok()) return t.status();
    TROUPE_RETURN_IF_ERROR(check_tensor(**t, {in, out}, false, "one expert of " + why));
    views->push_back(**t);
  }
  if (source.tensor(b + "ffn_" + kind + "." + std::to_string(n_expert) + ".weight") != nullptr)
    return invalid_argument("model tensor '" + b + "ffn_" + kind + "." + std::to_string(n_expert) +
                            ".weight' is an expert past expert_count " + std::to_string(n_expert));
  return {};
}

// A merged f32 bias {n, n_expert} as one vector per expert.
Status bind_expert_bias(const ModelSource& source, const std::string& name, int64_t n, int n_expert,
                        const std::string& arch, std::vector<WeightTensor>* views) {
  auto t = required(source, name, arch);
  if (!t.ok()) return t.status();
  TROUPE_RETURN_IF_ERROR(check_tensor(**t, {n, n_expert}, true, "expert_count " + std::to_string(n_expert)));
  views->clear();
  for (int e = 0; e < n_expert; ++e) views->push_back(expert_vector(**t, e));
  return {};
}

}  // namespace

Result<MoeHParams> read_moe_hparams(const ModelSource& source, const DecoderArch& traits, const std::string& arch,
                                    int64_t n_ff) {
  MoeHParams m;
  const std::string p = arch + ".";
  const int64_t n_expert = source.get_int(p + "expert_count").value_or(0);
  if (traits.moe == MoeUse::never || (traits.moe == MoeUse::optional && n_expert == 0)) {
    TROUPE_RETURN_IF_ERROR(refuse_mixture_of_experts(source, arch));
    return m;
  }
  if (n_expert < 1 || n_expert > kMaxExperts)
    return invalid_argument("model metadata '" + p + "expert_count' = " + std::to_string(n_expert) +
                            " is out of range (1.." + std::to_string(kMaxExperts) + "; architecture '" + arch +
                            "' is a mixture of experts)");
  const int64_t n_used = source.get_int(p + "expert_used_count").value_or(0);
  if (n_used < 1 || n_used > n_expert)
    return invalid_argument("model metadata '" + p + "expert_used_count' = " + std::to_string(n_used) +
                            " must be 1..expert_count (" + std::to_string(n_expert) + ")");
  m.n_expert = static_cast<int>(n_expert);
  m.n_used = static_cast<int>(n_used);
  if (traits.expert_ff_key) {
    m.n_ff_exp = source.get_int(p + "expert_feed_forward_length").value_or(0);
    if (m.n_ff_exp <= 0 || m.n_ff_exp > (int64_t{1} << 24))
      return invalid_argument("model metadata lacks a positive '" + p + "expert_feed_forward_length'");
  } else {
    m.n_ff_exp = n_ff;
    if (m.n_ff_exp <= 0) return invalid_argument("model metadata lacks '" + p + "feed_forward_length'");
  }
  m.router.n_expert = m.n_expert;
  m.router.n_used = m.n_used;
  m.router.gating = traits.gating;
  m.router.normalize = traits.moe_normalize;
  m.router.scale = static_cast<float>(source.get_float(p + "expert_weights_scale").value_or(0.0));
  if (!std::isfinite(m.router.scale) || m.router.scale < 0)
    return invalid_argument("model metadata '" + p + "expert_weights_scale' must be a non-negative number");
  m.swiglu_oai = traits.swiglu_oai;
  if (m.swiglu_oai) {
    // llama.cpp b11434 fixes alpha 1.702 and limit 7 (gpt-oss's config.json swiglu_limit); a
    // Hugging Face folder's swiglu_limit arrives as this key.
    m.swiglu_limit = static_cast<float>(source.get_float(p + "swiglu_limit").value_or(7.0));
    if (!(m.swiglu_limit > 0) || !std::isfinite(m.swiglu_limit))
      return invalid_argument("model metadata '" + p + "swiglu_limit' must be a positive number");
  }
  return m;
}

Result<MoeLayerWeights> bind_moe_layer(const ModelSource& source, const MoeHParams& moe, const std::string& arch,
                                       int64_t n_embd, int layer) {
  MoeLayerWeights w;
  const std::string b = "blk." + std::to_string(layer) + ".";
  const int E = moe.n_expert;
  const int64_t ff = moe.n_ff_exp;
  auto router = required(source, b + "ffn_gate_inp.weight", arch);
  if (!router.ok()) return router.status();
  TROUPE_RETURN_IF_ERROR(check_tensor(**router, {n_embd, E}, false, "embedding_length x expert_count"));
  w.router = *router;
  TROUPE_RETURN_IF_ERROR(bind_experts(source, b, "gate", n_embd, ff, E, arch, &w.gate));
  TROUPE_RETURN_IF_ERROR(bind_experts(source, b, "up", n_embd, ff, E, arch, &w.up));
  TROUPE_RETURN_IF_ERROR(bind_experts(source, b, "down", ff, n_embd, E, arch, &w.down));
  if (moe.swiglu_oai) {  // gpt-oss: the router and every expert matrix biased, as llama.cpp loads them
    auto rb = required(source, b + "ffn_gate_inp.bias", arch);
    if (!rb.ok()) return rb.status();
    TROUPE_RETURN_IF_ERROR(check_tensor(**rb, {E}, true, "expert_count"));
    w.router_bias = *rb;
    TROUPE_RETURN_IF_ERROR(bind_expert_bias(source, b + "ffn_gate_exps.bias", ff, E, arch, &w.gate_bias));
    TROUPE_RETURN_IF_ERROR(bind_expert_bias(source, b + "ffn_up_exps.bias", ff, E, arch, &w.up_bias));
    TROUPE_RETURN_IF_ERROR(bind_expert_bias(source, b + "ffn_down_exps.bias", n_embd, E, arch, &w.down_bias));
  } else {
    for (const char* extra : {"ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"})
      if (source.tensor(b + extra) != nullptr)
        return not_supported("model tensor '" + b + extra + "' is not supported (architecture '" + arch + "')");
  }
  for (int e = 0; e < E; ++e) {
    const size_t i = static_cast<size_t>(e);
    w.expert_bytes = std::max(w.expert_bytes, w.gate[i].nbytes + w.up[i].nbytes + w.down[i].nbytes);
  }
  return w;
}

}  // namespace troupe::models
