// When a request is done: stop token ids / end-of-generation tokens, stop
// strings (which may span several tokens) and max_tokens, as vLLM decides.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/protocol/sampling_params.hpp"
#include "runtime/protocol/finish_reason.hpp"

namespace troupe::sampling {

struct StopDecision {
  bool finished = false;
  FinishReason finish_reason = FinishReason::stop;  // stop or length, when finished
  std::string stop_reason;     // the stop string matched, if any
  int32_t stop_token = -1;     // the stop/EOG token, if that ended it
  /// When finished by a stop string: the output text is cut to this length (after the string
  /// with include_stop_str_in_output, else before it).
  size_t text_length = 0;
};

class StopChecker {
 public:
  explicit StopChecker(const SamplingParams& params);

  /// After a token was appended: `token`, whether the tokenizer calls it end-of-generation,
  /// the full output text so far (the token's text appended, a stop token's text not),
  /// `new_chars` added by this token, and the number of output tokens so far (this one included).
  StopDecision check(int32_t token, bool is_eog, const std::string& text, size_t new_chars,
                     size_t num_output_tokens) const;

  /// Whether `token`, the num_output_tokens-th output token, ends the request as a stop or
  /// end-of-generation token (its text is then left out of the output).
  bool is_stop_token(int32_t token, bool is_eog, size_t num_output_tokens) const;

  /// How much of `text` can be streamed without showing the start of a stop string that may
  /// still be completed by later tokens.
  size_t safe_text_length(const std::string& text) const;

 private:
  SamplingParams params_;
  size_t max_stop_len_ = 0;
};

}  // namespace troupe::sampling
