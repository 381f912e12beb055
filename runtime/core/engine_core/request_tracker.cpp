#include "runtime/core/engine_core/request_tracker.hpp"

#include <algorithm>

namespace troupe::engine {
namespace {
double seconds(RequestTracker::Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

RequestTracker::RequestTracker(std::string request_id, std::vector<int32_t> prompt_token_ids,
                               sampling::SamplingParams params, const tokenizer::Tokenizer& tokenizer,
                               Clock::time_point arrival)
    : id_(std::move(request_id)),
      prompt_(std::move(prompt_token_ids)),
      params_(std::move(params)),
      tokenizer_(&tokenizer),
      stop_(params_),
      decoder_(tokenizer, /*skip_special=*/true),
      arrival_(arrival),
      last_token_(arrival) {
  stats_.request_id = id_;
  stats_.num_prompt_tokens = static_cast<int64_t>(prompt_.size());
}

void RequestTracker::on_scheduled(Clock::time_point now) {
  if (!scheduled_) scheduled_ = now;
}

std::string RequestTracker::take_releasable() {
  // Until the end, hold back a tail that could still grow into a stop string.
  const size_t end = finished_ ? text_.size() : stop_.safe_text_length(text_);
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

RequestOutput RequestTracker::make_delta() {
  RequestOutput d;
  d.request_id = id_;
  if (first_delta_) {
    d.prompt_token_ids = prompt_;
    first_delta_ = false;
  }
  d.new_token_ids = std::move(pending_tokens_);
  pending_tokens_.clear();
  d.new_logprobs = std::move(pending_logprobs_);
  pending_logprobs_.clear();
  d.num_prompt_tokens = static_cast<int64_t>(prompt_.size());
  d.num_generated_tokens = num_generated_;
  d.new_text = take_releasable();
  if (finished_) {
    d.finished = true;
    d.finish_reason = finish_reason_;
    d.stop_reason = stop_reason_;
  }
  return d;
}

void RequestTracker::finish(FinishReason reason, Clock::time_point now) {
  finished_ = true;
  finish_reason_ = reason;
  stats_.finish_reason = to_string(reason);
  stats_.num_generation_tokens = num_generated_;
  stats_.e2e_latency_s = seconds(now - arrival_);
  auto sched = scheduled_.value_or(now);
  stats_.queued_time_s = seconds(sched - arrival_);
  if (first_token_) {
    stats_.time_to_first_token_s = seconds(*first_token_ - arrival_);
    stats_.prefill_time_s = seconds(*first_token_ - sched);
    stats_.decode_time_s = seconds(last_token_ - *first_token_);
    if (num_generated_ > 1)
      stats_.mean_time_per_output_token_s = stats_.decode_time_s / static_cast<double>(num_generated_ - 1);
  }
}

RequestOutput RequestTracker::on_token(int32_t token, const TokenLogprob* logprob, bool length_capped,
                                       Clock::time_point now) {
  ++num_generated_;
  last_was_first_ = !first_token_.has_value();
  last_latency_s_ = seconds(now - (first_token_ ? last_token_ : arrival_));
  if (!first_token_) first_token_ = now;
  last_token_ = now;
  pending_tokens_.push_back(token);
  if (logprob) pending_logprobs_.push_back(*logprob);

  // A token that stops the request adds no text (vLLM leaves the stop token out).
  const bool eog = tokenizer_->is_eog(token);
  const bool stop_id = stop_.is_stop_token(token, eog, static_cast<size_t>(num_generated_)) &&
                       std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(), token) !=
                           params_.stop_token_ids.end();
  size_t added = 0;
  if (!stop_.is_stop_token(token, eog, static_cast<size_t>(num_generated_))) {
    std::string piece = decoder_.push(token);
    added = piece.size();
    text_ += piece;
  }
  auto decision = stop_.check(token, eog, text_, added, static_cast<size_t>(num_generated_));
  if (!decision.finished && length_capped) {
    decision.finished = true;
    decision.finish_reason = FinishReason::length;
  }
  if (decision.finished) {
    if (!decision.stop_reason.empty()) {
      text_.resize(decision.text_length);  // what follows the stop string (and it, unless included) is not output
      emitted_ = std::min(emitted_, text_.size());
      stop_reason_ = decision.stop_reason;
    } else {
      text_ += decoder_.flush();
      if (stop_id) stop_reason_ = std::to_string(token);
    }
    finish(decision.finish_reason, now);
  }
  return make_delta();
}

RequestOutput RequestTracker::on_pooled(std::vector<float> embedding, Clock::time_point now) {
  first_token_ = now;  // the pooled output is its first and last result
  last_token_ = now;
  finish(FinishReason::stop, now);
  RequestOutput d = make_delta();
  d.embedding = std::move(embedding);
  return d;
}

RequestOutput RequestTracker::on_end(FinishReason reason, Status error, Clock::time_point now) {
  text_ += decoder_.flush();
  finish(reason, now);
  RequestOutput d = make_delta();
  d.error = std::move(error);
  return d;
}

}  // namespace troupe::engine
