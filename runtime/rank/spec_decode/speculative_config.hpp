// vLLM's --speculative-config: a JSON object naming the drafting method and its
// options. Only "ngram" (prompt lookup) is implemented; the other methods vLLM
// knows are refused by name.
#pragma once

#include <string>
#include <string_view>

#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::spec_decode {

/// Parses and validates `json`, e.g.
///   {"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}
/// As in vLLM: prompt_lookup_min and _max default to each other, and to 5 when both are
/// absent. invalid_argument for bad JSON, unknown keys, a missing or bad method, counts
/// below 1 or min > max; not_supported for vLLM's model-based methods (eagle, medusa, ...).
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

/// Checks a config built in code (the same rules as the parser); ok when it is off.
Status validate(const SpeculativeConfig& config);

/// "ngram, 4 tokens, n-gram 2..4" for the start-up log.
std::string describe(const SpeculativeConfig& config);

}  // namespace troupe::spec_decode
