#include "runtime/core/stats/logging_stat_logger.hpp"

#include <fmt/format.h>

#include "troupe/log.hpp"

namespace troupe::stats {

LoggingStatLogger::LoggingStatLogger(int engine_index, std::function<void(const std::string&)> sink,
                                     std::function<Clock::time_point()> now)
    : engine_index_(engine_index), sink_(std::move(sink)), now_(std::move(now)) {
  if (!sink_) sink_ = [](const std::string& line) { TROUPE_LOG_INFO("{}", line); };
  if (!now_) now_ = [] { return Clock::now(); };
  interval_start_ = now_();
}

void LoggingStatLogger::record(const SchedulerStats* s, const IterationStats* it, int) {
  if (s) {
    last_ = *s;
    prefix_queries_ += s->prefix_cache_queries;
    prefix_hits_ += s->prefix_cache_hits;
    const SpecDecodingStats& d = s->spec_decoding;
    spec_.num_drafts += d.num_drafts;
    spec_.num_draft_tokens += d.num_draft_tokens;
    spec_.num_accepted_tokens += d.num_accepted_tokens;
    if (spec_.num_accepted_tokens_per_pos.size() < d.num_accepted_tokens_per_pos.size())
      spec_.num_accepted_tokens_per_pos.resize(d.num_accepted_tokens_per_pos.size(), 0);
    for (size_t i = 0; i < d.num_accepted_tokens_per_pos.size(); ++i)
      spec_.num_accepted_tokens_per_pos[i] += d.num_accepted_tokens_per_pos[i];
  }
  if (it) {
    prompt_tokens_ += it->num_prompt_tokens;
    generation_tokens_ += it->num_generation_tokens;
  }
}

std::string LoggingStatLogger::format_line() const {
  double seconds = std::chrono::duration<double>(now_() - interval_start_).count();
  if (seconds <= 0) seconds = 1e-9;
  double hit_rate = prefix_queries_ > 0 ? 100.0 * static_cast<double>(prefix_hits_) / prefix_queries_ : 0.0;
  return fmt::format(
      "Engine {:03d}: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, "
      "Running: {} reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
      engine_index_, prompt_tokens_ / seconds, generation_tokens_ / seconds, last_.num_running_reqs,
      last_.num_waiting_reqs, 100.0 * last_.kv_cache_usage, hit_rate) +
         (last_.sleep_level != 0 ? fmt::format(", Sleeping (level {})", last_.sleep_level) : std::string());
}

std::string LoggingStatLogger::format_spec_decoding_line() const {
  if (spec_.num_drafts == 0) return {};
  double seconds = std::chrono::duration<double>(now_() - interval_start_).count();
  if (seconds <= 0) seconds = 1e-9;
  const auto drafts = static_cast<double>(spec_.num_drafts);
  const auto draft_tokens = static_cast<double>(spec_.num_draft_tokens);
  const auto accepted = static_cast<double>(spec_.num_accepted_tokens);
  // vLLM's: the mean tokens a verified draft yields (accepted ones plus the one the target adds).
  std::string per_pos;
  for (size_t i = 0; i < spec_.num_accepted_tokens_per_pos.size(); ++i)
    per_pos += fmt::format("{}{:.3f}", i ? ", " : "", static_cast<double>(spec_.num_accepted_tokens_per_pos[i]) / drafts);
  return fmt::format(
      "SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted throughput: {:.2f} tokens/s, Drafted "
      "throughput: {:.2f} tokens/s, Accepted: {} tokens, Drafted: {} tokens, Per-position acceptance rate: {}, Avg "
      "Draft acceptance rate: {:.1f}%",
      1.0 + accepted / drafts, accepted / seconds, draft_tokens / seconds, spec_.num_accepted_tokens,
      spec_.num_draft_tokens, per_pos, draft_tokens > 0 ? 100.0 * accepted / draft_tokens : 0.0);
}

void LoggingStatLogger::log() {
  bool idle = prompt_tokens_ == 0 && generation_tokens_ == 0 && last_.num_running_reqs == 0 &&
              last_.num_waiting_reqs == 0 && last_.sleep_level == last_logged_sleep_level_;
  last_logged_sleep_level_ = last_.sleep_level;
  // Like vLLM, an idle engine logs once and then stays quiet until work arrives.
  if (!idle || !idle_logged_) sink_(format_line());
  if (std::string spec = format_spec_decoding_line(); !spec.empty()) sink_(spec);
  idle_logged_ = idle;
  spec_ = {};
  prompt_tokens_ = generation_tokens_ = 0;
  prefix_queries_ = prefix_hits_ = 0;
  interval_start_ = now_();
}

void LoggingStatLogger::log_engine_initialized() { interval_start_ = now_(); }

}  // namespace troupe::stats
