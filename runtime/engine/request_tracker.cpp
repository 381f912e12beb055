#include "runtime/engine/request_tracker.hpp"

#include <algorithm>

namespace troupe::engine {
namespace {
double seconds(RequestTracker::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Bytes of `s` that form whole UTF-8 characters when cut at `n` (never split a character).
size_t utf8_floor(const std::string& s, size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}
}  // namespace

void accumulate(FinalOutput& f, const RequestOutput& d) {
  if (f.request_id.empty()) f.request_id = d.request_id;
  if (!d.prompt_token_ids.empty()) f.prompt_token_ids = d.prompt_token_ids;
  f.token_ids.insert(f.token_ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
  f.text += d.new_text;
  f.logprobs.insert(f.logprobs.end(), d.new_logprobs.begin(), d.new_logprobs.end());
  if (d.finished) {
    f.finish_reason = d.finish_reason;
    f.stop_reason = d.stop_reason;
    f.error = d.error;
  }
}

RequestTracker::RequestTracker(std::string request_id, std::vector<int32_t> prompt_token_ids,
                               sampling::SamplingParams params, const tokenizer::Tokenizer& tokenizer,
                               Clock::time_point arrival)
    : id_(std::move(request_id)),
      prompt_(std::move(prompt_token_ids)),
      params_(std::move(params)),
      decoder_(tokenizer, true),
      arrival_(arrival),
      last_token_(arrival) {
  for (const auto& s : params_.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
  stats_.request_id = id_;
  stats_.num_prompt_tokens = static_cast<int64_t>(prompt_.size());
}

void RequestTracker::on_scheduled(Clock::time_point now) {
  if (!scheduled_) scheduled_ = now;
}

std::string RequestTracker::take_releasable(bool final) {
  // Hold back the tail that could still grow into a stop string.
  size_t hold = (final || max_stop_len_ == 0) ? 0 : max_stop_len_ - 1;
  size_t end = text_.size() > hold ? text_.size() - hold : 0;
  end = utf8_floor(text_, end);
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
  return d;
}

void RequestTracker::finish(const std::string& reason, Clock::time_point now) {
  finished_ = true;
  finish_reason_ = reason;
  stats_.finish_reason = reason;
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

RequestOutput RequestTracker::on_token(int32_t token, const TokenLogprob* logprob, bool finished,
                                       const std::string& reason, const std::string& stop_reason,
                                       Clock::time_point now) {
  ++num_generated_;
  last_was_first_ = !first_token_.has_value();
  last_latency_s_ = seconds(now - (first_token_ ? last_token_ : arrival_));
  if (!first_token_) first_token_ = now;
  last_token_ = now;
  pending_tokens_.push_back(token);
  if (logprob) pending_logprobs_.push_back(*logprob);

  size_t search_from = text_.size() > max_stop_len_ ? text_.size() - max_stop_len_ : 0;
  text_ += decoder_.push(token);
  if (finished) text_ += decoder_.flush();
  // Stop strings: the earliest match wins; the stop string itself is not output.
  size_t best = std::string::npos;
  const std::string* matched = nullptr;
  for (const auto& s : params_.stop) {
    if (s.empty()) continue;
    size_t pos = text_.find(s, search_from);
    if (pos != std::string::npos && pos < best) {
      best = pos;
      matched = &s;
    }
  }
  if (matched) {
    text_.resize(best);
    emitted_ = std::min(emitted_, text_.size());
    stop_string_hit_ = true;
    stop_reason_ = *matched;
    finish("stop", now);
  } else if (finished) {
    stop_reason_ = stop_reason;
    finish(reason, now);
  }
  RequestOutput d = make_delta();
  d.new_text = take_releasable(finished_);
  if (finished_) {
    d.finished = true;
    d.finish_reason = finish_reason_;
    d.stop_reason = stop_reason_;
  }
  return d;
}

RequestOutput RequestTracker::on_end(const std::string& reason, const std::string& error, Clock::time_point now) {
  text_ += decoder_.flush();
  finish(reason, now);
  RequestOutput d = make_delta();
  d.new_text = take_releasable(true);
  d.finished = true;
  d.finish_reason = reason;
  d.error = error;
  return d;
}

}  // namespace troupe::engine
