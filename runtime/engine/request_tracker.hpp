// Per-request output processing on the engine side: incremental
// detokenization, stop strings (text that could still become a stop string is
// held back, as vLLM does), and the request's latency stats.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/request_types.hpp"
#include "runtime/tokenizer/incremental_decoder.hpp"
#include "troupe/stats.hpp"

namespace troupe::engine {

class RequestTracker {
 public:
  using Clock = std::chrono::steady_clock;

  RequestTracker(std::string request_id, std::vector<int32_t> prompt_token_ids, sampling::SamplingParams params,
                 const tokenizer::Tokenizer& tokenizer, Clock::time_point arrival);

  /// The request was scheduled for the first time (ends its queued time).
  void on_scheduled(Clock::time_point now);

  /// One sampled token. `finished`/`reason`/`stop_reason` say whether the
  /// scheduler ended the request with it (EOG, stop token, length). Returns the
  /// delta to stream; delta.finished is also set when a stop string matched
  /// (then the scheduler must be told to stop the request).
  RequestOutput on_token(int32_t token, const TokenLogprob* logprob, bool finished, const std::string& reason,
                         const std::string& stop_reason, Clock::time_point now);

  /// A final delta for an abort or an error.
  RequestOutput on_end(const std::string& reason, const std::string& error, Clock::time_point now);

  bool finished() const { return finished_; }
  bool stop_string_hit() const { return stop_string_hit_; }
  /// Filled once finished.
  const FinishedRequestStats& finished_stats() const { return stats_; }
  /// Latency of the last token: time to first token (first) or inter-token gap.
  bool last_was_first_token() const { return last_was_first_; }
  double last_latency_s() const { return last_latency_s_; }
  const std::string& id() const { return id_; }
  int64_t num_generated() const { return num_generated_; }
  bool wants_logprobs() const { return params_.logprobs >= 0; }

 private:
  RequestOutput make_delta();
  void finish(const std::string& reason, Clock::time_point now);
  std::string take_releasable(bool final);

  std::string id_;
  std::vector<int32_t> prompt_;
  sampling::SamplingParams params_;
  tokenizer::IncrementalDecoder decoder_;
  size_t max_stop_len_ = 0;
  std::string text_;          // all generated text so far (truncated at a stop string)
  size_t emitted_ = 0;        // bytes of text_ already streamed
  std::vector<int32_t> pending_tokens_;
  std::vector<TokenLogprob> pending_logprobs_;
  bool first_delta_ = true;
  bool finished_ = false;
  bool stop_string_hit_ = false;
  std::string finish_reason_;
  std::string stop_reason_;
  int64_t num_generated_ = 0;
  Clock::time_point arrival_;
  std::optional<Clock::time_point> scheduled_;
  std::optional<Clock::time_point> first_token_;
  Clock::time_point last_token_;
  bool last_was_first_ = false;
  double last_latency_s_ = 0;
  FinishedRequestStats stats_;
};

}  // namespace troupe::engine
