#include "runtime/rank/models/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

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

// YaRN (gpt-oss) as ggml b11434 computes it (ggml_rope_yarn_corr_dims, rope_yarn): pair i's
// angle is p * theta_i * (s (1 - r_i) + r_i), s = 1 / factor, with the ramp
// r_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1) over the correction dims
// low = floor(d ln(n_orig / (beta_fast 2 pi)) / (2 ln base)), high = ceil(the same with
// beta_slow); so its frequency factor is 1 / (s (1 - r_i) + r_i). cos and sin are scaled by
// attn_factor (1 + 0.1 ln factor), llama.cpp's yarn_attn_factor times the kernel's mscale.
Result<RopeScaling> read_yarn(const ModelSource& source, const RopeScalingQuery& q) {
  const std::string p = q.arch + ".rope.scaling.";
  const double factor = source.get_float(p + "factor").value_or(0.0);
  const int64_t original = source.get_int(p + "original_context_length").value_or(q.n_ctx_train);
  const double beta_fast = source.get_float(p + "yarn_beta_fast").value_or(32.0);
  const double beta_slow = source.get_float(p + "yarn_beta_slow").value_or(1.0);
  const double attn = source.get_float(p + "attn_factor").value_or(1.0);
  if (!(factor > 0) || !std::isfinite(factor) || original <= 0 || !(beta_fast > 0) || !(beta_slow > 0) ||
      !(attn > 0) || !std::isfinite(attn))
    return invalid_argument("rope scaling yarn needs a positive '" + p + "factor', '" + p +
                            "original_context_length' (or context_length), yarn_beta_fast, yarn_beta_slow and "
                            "attn_factor; architecture '" + q.arch + "'");
  if (source.get_float(p + "yarn_log_multiplier").value_or(0.0) != 0.0 ||
      source.get_float(p + "yarn_ext_factor").value_or(1.0) != 1.0)
    return not_supported("rope scaling yarn with '" + p + "yarn_log_multiplier' or a '" + p +
                         "yarn_ext_factor' other than 1 is not supported; architecture '" + q.arch + "'");
  const int d = q.rope_dim;
  const auto corr = [&](double beta) {
    return d * std::log(static_cast<double>(original) / (beta * 2 * std::numbers::pi)) / (2 * std::log(static_cast<double>(q.theta)));
  };
  const double low = std::max(0.0, std::floor(corr(beta_fast)));
  const double high = std::min(static_cast<double>(d - 1), std::ceil(corr(beta_slow)));
  const double s = 1.0 / factor;
  RopeScaling rs;
  rs.freq_factors.resize(static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    const double y = (i - low) / std::max(0.001, high - low);
    const double r = 1.0 - std::min(1.0, std::max(0.0, y));
    rs.freq_factors[static_cast<size_t>(i)] = static_cast<float>(1.0 / (s * (1.0 - r) + r));
  }
  rs.mscale = static_cast<float>(attn * (factor > 1.0 ? 1.0 + 0.1 * std::log(factor) : 1.0));
  rs.description = "yarn x" + std::to_string(factor).substr(0, 5) + " from " + std::to_string(original);
  return rs;
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
  if (type == "yarn") return read_yarn(source, q);
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
