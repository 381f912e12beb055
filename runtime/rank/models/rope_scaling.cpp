#include "runtime/rank/models/rope_scaling.hpp"

#include <cmath>
#include <cstring>

#include "troupe/dtype.hpp"

namespace troupe::models {

std::vector<float> llama3_rope_factors(const Llama3RopeParams& p, float theta, int rope_dim) {
  const double low_wavelen = p.original_context_length / p.low_freq_factor;
  const double high_wavelen = p.original_context_length / p.high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < rope_dim; i += 2) {
    const float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(rope_dim));
    const double wavelen = 2 * M_PI / static_cast<double>(freq);
    double f = 1.0;
    if (wavelen < high_wavelen) {
      f = 1.0;
    } else if (wavelen > low_wavelen) {
      f = p.factor;
    } else {
      const double smooth =
          (p.original_context_length / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / p.factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

Result<RopeScaling> read_rope_scaling(const ModelSource& source, const std::string& arch, int rope_dim, float theta,
                                      bool reads_rope_freqs) {
  const std::string p = arch + ".rope.scaling.";
  RopeScaling rs;
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"})
    if (source.tensor(name) != nullptr)
      return not_supported("model tensor '" + std::string(name) +
                           "' (Phi-3 long-context RoPE factors) is not supported yet; architecture '" + arch + "'");
  const std::string type = source.get_string(p + "type").value_or("none");
  if (type == "yarn" || type == "longrope")
    return not_supported("rope scaling '" + type + "' ('" + p + "type') is not supported yet; architecture '" + arch +
                         "'");
  if (type != "none" && type != "linear" && type != "llama3")
    return invalid_argument("unknown rope scaling '" + type + "' ('" + p + "type'; known: none, linear, llama3)");
  const size_t pairs = static_cast<size_t>(rope_dim / 2);
  const WeightTensor* freqs = source.tensor("rope_freqs.weight");
  if (freqs != nullptr && !reads_rope_freqs)
    return not_supported("model tensor 'rope_freqs.weight' is not part of architecture '" + arch +
                         "' (llama.cpp refuses it there too)");
  if (const WeightTensor* t = freqs) {
    if (t->type != DType::f32 || t->ne[0] != static_cast<int64_t>(pairs) || t->rows() != 1 || t->data == nullptr ||
        t->nbytes != pairs * sizeof(float))
      return invalid_argument("model tensor 'rope_freqs.weight' must be f32 of " + std::to_string(pairs) +
                              " elements (rotary dimensions / 2)");
    rs.freq_factors.resize(pairs);
    std::memcpy(rs.freq_factors.data(), t->data, pairs * sizeof(float));
    rs.description = "rope_freqs.weight";
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
    rs.freq_factors = llama3_rope_factors(lp, theta, rope_dim);
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
