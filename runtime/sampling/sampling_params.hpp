// Per-request sampling settings, with the meaning vLLM gives them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::sampling {

struct SamplingParams {
  float temperature = 1.0f;          // 0: greedy
  float top_p = 1.0f;                // (0, 1]
  int32_t top_k = 0;                 // 0 or -1: all tokens
  float min_p = 0.0f;                // [0, 1]
  float repetition_penalty = 1.0f;   // > 0; over prompt + output tokens
  float presence_penalty = 0.0f;     // [-2, 2]; over output tokens
  float frequency_penalty = 0.0f;    // [-2, 2]; over output tokens
  std::optional<uint64_t> seed;      // reproducible sampling
  int32_t max_tokens = 16;           // >= 1
  std::vector<std::string> stop;     // stop strings (not included in the output)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t logprobs = -1;             // number of top logprobs to return; -1: none
  /// Arguments for logits processors (vLLM's extra_args, the body's `vllm_xargs`): a JSON
  /// object as text; empty: none.
  std::string extra_args;

  bool greedy() const { return temperature == 0.0f; }
  /// ok, or invalid_argument naming the offending parameter.
  Status validate() const;
};

}  // namespace troupe::sampling
