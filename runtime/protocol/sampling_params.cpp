#include "runtime/protocol/sampling_params.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace troupe::sampling {
namespace {

// invalid_argument "<name> <what>", naming the field for callers that report it apart.
Status bad(std::string* field, const char* name, const std::string& what) {
  if (field) *field = name;
  return invalid_argument(fmt::format("{} {}", name, what));
}

}  // namespace

Status SamplingParams::validate_structured_output(std::string* field) const {
  const std::string& k = structured_output;
  const bool json = k == "json_object" || k == "json_schema" || k == "structural_tag";
  const bool with_spec = k == "json_schema" || k == "regex" || k == "grammar" || k == "structural_tag";
  if (!k.empty() && !json && !with_spec && k != "choice")
    return bad(field, "structured_output",
               fmt::format("must be empty, json_object, json_schema, regex, grammar, structural_tag or choice, got '{}'",
                           k));
  if ((k == "choice") != !choices.empty())
    return bad(field, "choices", "must be given exactly with structured_output choice");
  for (const auto& c : choices)
    if (c.empty()) return bad(field, "choices", "must not be empty strings");
  if (with_spec != !structured_spec.empty())
    return bad(field, "structured_spec",
               "must be given exactly with structured_output json_schema, regex, grammar and structural_tag");
  if ((structured_compact || !structured_whitespace_pattern.empty()) && !json)
    return bad(field, "structured_compact",
               "whitespace options apply to JSON outputs (json_object, json_schema, structural_tag)");
  if (structured_compact && !structured_whitespace_pattern.empty())
    return bad(field, "structured_whitespace_pattern", "cannot be combined with structured_compact (no whitespace)");
  return {};
}

Status SamplingParams::validate(std::string* field) const {
  if (field) field->clear();
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return bad(field, "temperature", fmt::format("must be a finite number >= 0, got {}", temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad(field, "top_p", fmt::format("must be in (0, 1], got {}", top_p));
  if (top_k < -1) return bad(field, "top_k", fmt::format("must be -1 (disable), 0 (disable) or at least 1, got {}", top_k));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad(field, "min_p", fmt::format("must be in [0, 1], got {}", min_p));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return bad(field, "repetition_penalty", fmt::format("must be a finite number > 0, got {}", repetition_penalty));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return bad(field, "presence_penalty", fmt::format("must be in [-2, 2], got {}", presence_penalty));
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return bad(field, "frequency_penalty", fmt::format("must be in [-2, 2], got {}", frequency_penalty));
  if (max_tokens < 1) return bad(field, "max_tokens", fmt::format("must be at least 1, got {}", max_tokens));
  for (const auto& s : stop)
    if (s.empty()) return bad(field, "stop", "strings must not be empty");
  for (int32_t id : stop_token_ids)
    if (id < 0) return bad(field, "stop_token_ids", fmt::format("must be non-negative, got {}", id));
  if (logprobs < -1 || logprobs > kMaxLogprobs)
    return bad(field, "logprobs", fmt::format("must be between 0 and {}, got {}", kMaxLogprobs, logprobs));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return bad(field, "logit_bias", fmt::format("token ids must be non-negative, got {}", id));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return bad(field, "logit_bias", fmt::format("values must be in [-100, 100], got {}", bias));
  }
  for (int32_t id : allowed_token_ids)
    if (id < 0) return bad(field, "allowed_token_ids", fmt::format("must be non-negative, got {}", id));
  for (const auto& word : bad_words_token_ids)
    for (int32_t id : word)
      if (id < 0) return bad(field, "bad_words", fmt::format("token ids must be non-negative, got {}", id));
  TROUPE_RETURN_IF_ERROR(validate_structured_output(field));
  if (min_tokens < 0) return bad(field, "min_tokens", fmt::format("must be non-negative, got {}", min_tokens));
  if (min_tokens > max_tokens)
    return bad(field, "min_tokens", fmt::format("must be at most max_tokens ({}), got {}", max_tokens, min_tokens));
  return {};
}

}  // namespace troupe::sampling
