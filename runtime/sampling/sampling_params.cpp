#include "runtime/sampling/sampling_params.hpp"

#include <cmath>
#include <string>

namespace troupe::sampling {
namespace {
std::string num(double v) {
  if (std::isnan(v)) return "nan";
  std::string s = std::to_string(v);
  return s;
}
}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return invalid_argument("temperature must be a finite number >= 0, got " + num(temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1], got " + num(top_p));
  if (top_k < -1) return invalid_argument("top_k must be -1 (disable), 0 (disable) or at least 1, got " + std::to_string(top_k));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return invalid_argument("min_p must be in [0, 1], got " + num(min_p));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return invalid_argument("repetition_penalty must be a finite number > 0, got " + num(repetition_penalty));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return invalid_argument("presence_penalty must be in [-2, 2], got " + num(presence_penalty));
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return invalid_argument("frequency_penalty must be in [-2, 2], got " + num(frequency_penalty));
  if (max_tokens < 1) return invalid_argument("max_tokens must be at least 1, got " + std::to_string(max_tokens));
  for (const auto& s : stop)
    if (s.empty()) return invalid_argument("stop strings must not be empty");
  for (int32_t id : stop_token_ids)
    if (id < 0) return invalid_argument("stop_token_ids must be non-negative, got " + std::to_string(id));
  if (logprobs < -1 || logprobs > 20)
    return invalid_argument("logprobs must be -1 (none) or between 0 and 20, got " + std::to_string(logprobs));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return invalid_argument("logit_bias token ids must be non-negative, got " + std::to_string(id));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return invalid_argument("logit_bias values must be in [-100, 100], got " + num(bias));
  }
  for (int32_t id : allowed_token_ids)
    if (id < 0) return invalid_argument("allowed_token_ids must be non-negative, got " + std::to_string(id));
  if (!structured_output.empty() && structured_output != "json_object" && structured_output != "json_schema" &&
      structured_output != "choice")
    return invalid_argument("structured_output must be empty, json_object, json_schema or choice, got '" +
                            structured_output + "'");
  if ((structured_output == "choice") != !choices.empty())
    return invalid_argument("choices must be given exactly with structured_output choice");
  for (const auto& c : choices)
    if (c.empty()) return invalid_argument("choices must not be empty strings");
  if ((structured_output == "json_schema") != !json_schema.empty())
    return invalid_argument("json_schema must be given exactly with structured_output json_schema");
  if (min_tokens < 0 || min_tokens > max_tokens)
    return invalid_argument("min_tokens must be between 0 and max_tokens (" + std::to_string(max_tokens) + "), got " +
                            std::to_string(min_tokens));
  return {};
}

}  // namespace troupe::sampling
