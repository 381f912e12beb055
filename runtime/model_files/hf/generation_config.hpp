// generation_config.json (transformers' GenerationConfig) as vLLM reads it for
// its default sampling parameters (--generation-config auto): temperature,
// top_p, top_k, min_p, repetition_penalty and max_new_tokens (as max_tokens),
// each only when it differs from transformers' own default (vLLM takes the
// config's to_diff_dict(), so a file's "top_k": 50 or "temperature": 1.0 sets
// nothing); eos_token_id (an id or a list) stops generation too.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::hf {

/// The defaults of a parsed generation_config.json; `file` names it in errors (one line:
/// the key and what it should be).
Result<GenerationDefaults> read_generation_defaults(const nlohmann::json& config, const std::string& file);
/// `dir`/generation_config.json read; an empty GenerationDefaults when the file is absent.
Result<GenerationDefaults> read_generation_defaults_file(const std::string& dir);

}  // namespace troupe::hf
