#include "runtime/rank/models/rope_scaling.hpp"

#include <cmath>
#include <cstring>

#include "troupe/dtype.hpp"

namespace troupe::models {

namespace {

// A tensor of `pairs` f32 divisors (rope_freqs, rope_factors_long/short), copied out.
Result<std::vector<float>> factor_tensor(const WeightTensor& t, size_t pairs) {
  if (t.type != DType::f32 || t.ne[0] != static_cast<int64_t>(pairs) || t.rows() != 1 || t.data == nullptr ||
      t.nbytes != pairs * sizeof(float))
    return invalid_argument("model tensor '" + t.name + "' must be f32 of " + std::to_string(pairs) +
                            " elements (rotary dimensions / 2)");
  std::vector<float> f(pairs);
  std::memcpy(f.data(), t.data, pairs * sizeof(float));
  return f;
}

}  // namespace

Result<RopeScaling> read_rope_scaling(const ModelSource& source, const RopeScalingQuery& q) {
  const std::string& arch = q.arch;
  const std::string p = arch + ".rope.scaling.";
  RopeScaling rs;
  const WeightTensor* long_f = source.tensor("rope_factors_long.weight");
  const WeightTensor* short_f = source.tensor("rope_factors_short.weight");
  if ((long_f != nullptr || short_f != nullptr) && !q.reads_long_short_factors)
    return not_supported("model tensor '" + std::string(long_f ? long_f->name : short_f->name) +
                         "' (long-context RoPE factors) is not part of architecture '" + arch + "'");
  if ((long_f == nullptr) != (short_f == nullptr))
    return invalid_argument(std::string("model tensor '") + (long_f ? "rope_factors_short.weight" : "rope_factors_long.weight") +
                            "' is missing: long-context RoPE needs both rope_factors_long.weight and "
                            "rope_factors_short.weight (architecture '" + arch + "')");
  const std::string type = source.get_string(p + "type").value_or("none");
  if (type == "yarn")
    return not_supported("rope scaling '" + type + "' ('" + p + "type') is not supported yet; architecture '" + arch +
                         "'");
  if (type == "longrope" && long_f == nullptr)
    return invalid_argument("rope scaling 'longrope' ('" + p + "type') needs the tensors rope_factors_long.weight and "
                            "rope_factors_short.weight; architecture '" + arch + "'");
  if (type != "none" && type != "linear" && type != "llama3" && type != "longrope")
    return invalid_argument("unknown rope scaling '" + type + "' ('" + p + "type'; known: none, linear, llama3, longrope)");
  const size_t pairs = static_cast<size_t>(q.rope_dim / 2);
  const WeightTensor* freqs = source.tensor("rope_freqs.weight");
  if (freqs != nullptr && !q.reads_rope_freqs)
    return not_supported("model tensor 'rope_freqs.weight' is not part of architecture '" + arch +
                         "' (llama.cpp refuses it there too)");
  if (freqs != nullptr && long_f != nullptr)
    return invalid_argument("the model has both rope_freqs.weight and rope_factors_long/short.weight; architecture '" +
                            arch + "' reads one kind of RoPE factors");
  if (const WeightTensor* t = freqs) {
    auto f = factor_tensor(*t, pairs);
    if (!f.ok()) return f.status();
    rs.freq_factors = std::move(*f);
    rs.description = "rope_freqs.weight";
  } else if (long_f != nullptr) {
    const int64_t train = q.n_ctx_train > 0 ? q.n_ctx_train : 0;
    const int64_t original = source.get_int(p + "original_context_length").value_or(train);
    if (original <= 0)
      return invalid_argument("long-context RoPE needs a positive '" + p + "original_context_length' (or context_length)");
    const int64_t context = q.engine_context > 0 ? q.engine_context : train;
    const bool use_long = context > original;
    auto f = factor_tensor(use_long ? *long_f : *short_f, pairs);
    if (!f.ok()) return f.status();
    auto other = factor_tensor(use_long ? *short_f : *long_f, pairs);  // checked too: a bad file is refused whatever the context
    if (!other.ok()) return other.status();
    rs.freq_factors = std::move(*f);
    rs.long_factors = use_long;
    rs.description = std::string(use_long ? "rope_factors_long.weight" : "rope_factors_short.weight") + " (context " +
                     std::to_string(context) + (use_long ? " > " : " <= ") + "original " + std::to_string(original) + ")";
  } else if (type == "llama3") {
    Llama3RopeParams lp;
    auto num = [&](const char* key, float* out) { *out = static_cast<float>(source.get_float(p + key).value_or(*out)); };
    num("factor", &lp.factor);
    num("low_freq_factor", &lp.low_freq_factor);
    num("high_freq_factor", &lp.high_freq_factor);
    if (auto n = source.get_int(p + "original_context_length")) lp.original_context_length = static_cast<float>(*n);
    if (!(lp.factor >= 1) || !(lp.low_freq_factor > 0) || !(lp.high_freq_factor > lp.low_freq_factor) ||
        !(lp.original_context_length > 0))
      return invalid_argument("rope scaling llama3 needs factor >= 1, 0 < low_freq_factor < high_freq_factor and a "
                              "positive original_context_length ('" + p + "*')");
    rs.freq_factors = llama3_rope_factors(lp, q.theta, q.rope_dim);
    rs.description = "llama3 (keys)";
  }
  if (type == "linear") {
    double factor = source.get_float(p + "factor").value_or(0.0);
    if (factor == 0.0) factor = source.get_float(arch + ".rope.scale_linear").value_or(0.0);
    if (factor != 0.0 && factor != 1.0) {
      if (!(factor > 0) || !std::isfinite(factor))
        return invalid_argument("'" + p + "factor' must be a positive number");
      if (rs.freq_factors.empty()) rs.freq_factors.assign(pairs, 1.0f);
      for (float& f : rs.freq_factors) f = static_cast<float>(f * factor);
      rs.description += (rs.description.empty() ? "" : " + ") + std::string("linear x") + std::to_string(factor);
    }
  }
  for (float f : rs.freq_factors)
    if (!(f > 0) || !std::isfinite(f)) return invalid_argument("rope frequency factors must be positive numbers");
  rs.mscale = static_cast<float>(source.get_float(p + "attn_factor").value_or(1.0));
  if (!(rs.mscale > 0) || !std::isfinite(rs.mscale))
    return invalid_argument("'" + p + "attn_factor' must be a positive number");
  return rs;
}

}  // namespace troupe::models
