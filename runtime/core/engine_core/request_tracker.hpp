// Per-request output processing inside the engine core: incremental
// detokenization, the one stop check (StopChecker: stop/EOG tokens, stop
// strings, max_tokens), hold-back of text that could still become a stop
// string (as vLLM does), and the request's latency stats.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runtime/protocol/request_types.hpp"
#include "runtime/core/engine_core/stop_checker.hpp"
#include "runtime/text/tokenizer/incremental_decoder.hpp"
#include "runtime/core/stats/engine_stats.hpp"

namespace troupe::engine {

class RequestTracker {
 public:
  using Clock = std::chrono::steady_clock;

  RequestTracker(std::string request_id, std::vector<int32_t> prompt_token_ids, sampling::SamplingParams params,
                 const tokenizer::Tokenizer& tokenizer, Clock::time_point arrival);

  /// The request was scheduled for the first time (ends its queued time).
  void on_scheduled(Clock::time_point now);

  /// One sampled token. `length_capped`: the scheduler ended the request
  /// because it reached max_tokens or the model length. Returns the delta to
  /// stream; delta.finished says whether the request ended with this token
  /// (a stop token, EOG, a stop string or the length).
  RequestOutput on_token(int32_t token, const TokenLogprob* logprob, bool length_capped, Clock::time_point now);

  /// A pooling request's result: its only, final delta (finish reason stop).
  RequestOutput on_pooled(std::vector<float> embedding, Clock::time_point now);

  /// A final delta for an abort or an error.
  RequestOutput on_end(FinishReason reason, Status error, Clock::time_point now);

  bool finished() const { return finished_; }
  /// Filled once finished.
  const FinishedRequestStats& finished_stats() const { return stats_; }
  /// Latency of the last token: time to first token (first) or inter-token gap.
  bool last_was_first_token() const { return last_was_first_; }
  double last_latency_s() const { return last_latency_s_; }
  const std::string& id() const { return id_; }
  Clock::time_point arrival() const { return arrival_; }
  int64_t num_generated() const { return num_generated_; }
  bool wants_logprobs() const { return params_.logprobs >= 0; }
  const sampling::SamplingParams& params() const { return params_; }

 private:
  RequestOutput make_delta();
  void finish(FinishReason reason, Clock::time_point now);
  std::string take_releasable();

  std::string id_;
  std::vector<int32_t> prompt_;
  sampling::SamplingParams params_;
  const tokenizer::Tokenizer* tokenizer_;
  sampling::StopChecker stop_;
  tokenizer::IncrementalDecoder decoder_;
  std::string text_;          // all generated text so far (cut at a stop string)
  size_t emitted_ = 0;        // bytes of text_ already streamed
  std::vector<int32_t> pending_tokens_;
  std::vector<TokenLogprob> pending_logprobs_;
  bool first_delta_ = true;
  bool finished_ = false;
  FinishReason finish_reason_ = FinishReason::stop;
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
