// --speculative-config, shared by `troupe serve` and `troupe generate` (vLLM's
// flag): a JSON object, e.g.
//   --speculative-config '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}'
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runtime/rank/spec_decode/speculative_config.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

inline void add_speculative_options(CLI::App& sub, std::string* json) {
  sub.add_option("--speculative-config", *json,
                 "Speculative decoding as a JSON object (vLLM's): "
                 "{\"method\":\"ngram\",\"num_speculative_tokens\":K,\"prompt_lookup_max\":N,\"prompt_lookup_min\":M}. "
                 "Only the n-gram (prompt lookup) drafter is implemented: it proposes up to K tokens that followed an "
                 "earlier occurrence of the last M..N tokens, and the model verifies them in one step");
}

/// Parses `json` into config->speculative (nothing when empty); a bad config is invalid_argument
/// (not_supported for model-based methods).
inline Status apply_speculative_options(const std::string& json, EngineConfig* config) {
  if (json.empty()) return {};
  auto parsed = spec_decode::parse_speculative_config(json);
  if (!parsed) return parsed.status();
  config->speculative = *parsed;
  if (!config->model.logits_processors.empty())
    return not_supported("--speculative-config together with --logits-processors is not implemented yet");
  return {};
}

}  // namespace troupe::apps
