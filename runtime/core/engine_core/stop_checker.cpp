#include "runtime/core/engine_core/stop_checker.hpp"

#include <algorithm>

namespace troupe::sampling {

StopChecker::StopChecker(const SamplingParams& params) : params_(params) {
  for (const auto& s : params_.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

bool StopChecker::is_stop_token(int32_t token, bool is_eog, size_t num_output_tokens) const {
  if (static_cast<int64_t>(num_output_tokens) < params_.min_tokens) return false;
  const bool stop_id =
      std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(), token) != params_.stop_token_ids.end();
  return (is_eog && !params_.ignore_eos) || stop_id;
}

StopDecision StopChecker::check(int32_t token, bool is_eog, const std::string& text, size_t new_chars,
                                size_t num_output_tokens) const {
  StopDecision d;
  // vLLM: nothing but the length ends a request before min_tokens tokens.
  const bool stoppable = static_cast<int64_t>(num_output_tokens) >= params_.min_tokens;
  if (is_stop_token(token, is_eog, num_output_tokens)) {
    d.finished = true;
    d.finish_reason = FinishReason::stop;
    d.stop_token = token;
    d.text_length = text.size();
    return d;
  }
  if (stoppable && !params_.stop.empty() && new_chars > 0) {
    // A match must end inside the new characters; it may start up to max_stop_len-1 before them.
    const size_t new_begin = text.size() - std::min(new_chars, text.size());
    const size_t from = new_begin >= max_stop_len_ - 1 ? new_begin - (max_stop_len_ - 1) : 0;
    size_t best = std::string::npos;
    std::string best_str;
    for (const auto& s : params_.stop) {
      size_t pos = text.find(s, from);
      if (pos != std::string::npos && pos < best) {
        best = pos;
        best_str = s;
      }
    }
    if (best != std::string::npos) {
      d.finished = true;
      d.finish_reason = FinishReason::stop;
      d.stop_reason = best_str;
      d.text_length = params_.include_stop_str_in_output ? best + best_str.size() : best;
      return d;
    }
  }
  if (static_cast<int64_t>(num_output_tokens) >= params_.max_tokens) {
    d.finished = true;
    d.finish_reason = FinishReason::length;
    d.text_length = text.size();
  }
  return d;
}

size_t StopChecker::safe_text_length(const std::string& text) const {
  size_t hold = 0;
  for (const auto& s : params_.stop) {
    // The longest proper prefix of s that is a suffix of text.
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  }
  return text.size() - hold;
}

}  // namespace troupe::sampling
