// Per-request sampling settings, with the meaning vLLM gives them.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::sampling {

struct SamplingParams {
  float temperature = 1.0f;          // 0 (or below ~2.9e-39, where 1/T overflows): greedy
  float top_p = 1.0f;                // (0, 1]
  int32_t top_k = 0;                 // 0 or -1: all tokens
  float min_p = 0.0f;                // [0, 1]
  float repetition_penalty = 1.0f;   // > 0; over prompt + output tokens
  float presence_penalty = 0.0f;     // [-2, 2]; over output tokens
  float frequency_penalty = 0.0f;    // [-2, 2]; over output tokens
  std::optional<uint64_t> seed;      // reproducible sampling
  int32_t max_tokens = 16;           // >= 1
  std::vector<std::string> stop;     // stop strings (not in the output unless include_stop_str_in_output)
  bool include_stop_str_in_output = false;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  /// The most top logprobs a request may ask for (vLLM's default max_logprobs).
  static constexpr int32_t kMaxLogprobs = 20;
  int32_t logprobs = -1;             // number of top logprobs to return (<= kMaxLogprobs); -1: none
  /// OpenAI's logit_bias: (token id, bias in [-100, 100]) added to the logits before the
  /// penalties.
  std::vector<std::pair<int32_t, float>> logit_bias;
  /// vLLM's allowed_token_ids: only these tokens can be sampled; empty: every token.
  std::vector<int32_t> allowed_token_ids;
  /// vLLM's min_tokens: until this many tokens were generated, the tokens of
  /// min_tokens_banned_ids cannot be sampled and no stop string or stop token ends the request.
  int32_t min_tokens = 0;
  /// Set by the engine when a request arrives: stop_token_ids, and the model's
  /// end-of-generation tokens unless ignore_eos (vLLM's all_stop_token_ids).
  std::vector<int32_t> min_tokens_banned_ids;
  /// vLLM's bad_words as token sequences (admission tokenizes the words): a sequence's last
  /// token cannot be sampled when the output so far ends with the rest of it (a one-token
  /// sequence: never). Such rows are sampled on the host.
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  /// Structured output, enforced token by token on the driver by the grammar engine
  /// (runtime/rank/structured/): "json_object" (one JSON object), "json_schema" (a value
  /// the JSON Schema `structured_spec` admits), "regex" (the whole output matches the
  /// regex `structured_spec`, Python syntax), "grammar" (the Lark or GBNF grammar
  /// `structured_spec`), "structural_tag" (vLLM's structural tag, JSON text in
  /// `structured_spec`), "choice" (exactly one of `choices`); empty: free text.
  std::string structured_output;
  /// The schema, regex, grammar or structural tag text of structured_output.
  std::string structured_spec;
  /// With structured_output "choice" (vLLM's guided_choice): the output is exactly one of these.
  std::vector<std::string> choices;
  /// JSON (json_object, json_schema, structural_tag): vLLM's disable_any_whitespace, no
  /// whitespace between JSON's tokens.
  bool structured_compact = false;
  /// JSON: vLLM's whitespace_pattern, the regex of the whitespace between JSON's tokens
  /// instead of the default (runs of at most 20 spaces, tabs and newlines); empty: the default.
  std::string structured_whitespace_pattern;
  /// Arguments for logits processors (vLLM's extra_args, the body's `vllm_xargs`): a JSON
  /// object as text; empty: none.
  std::string extra_args;

  /// A temperature whose inverse overflows would scale the best logit by 0 x inf = NaN:
  /// it is the greedy limit, and greedy it is.
  bool greedy() const { return !(temperature > 0.0f) || std::isinf(1.0f / temperature); }
  /// The one home of the parameters' ranges: ok, or invalid_argument whose message
  /// names the offending parameter; `field`, when given, is set to that name.
  Status validate(std::string* field = nullptr) const;

 private:
  Status validate_structured_output(std::string* field) const;
};

}  // namespace troupe::sampling
