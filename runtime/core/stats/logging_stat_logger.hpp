// The built-in logging stat logger: once per interval, vLLM's line
// "Engine 000: Avg prompt throughput: ... Running: N reqs, Waiting: M reqs, KV cache usage: ...",
// and with speculative decoding vLLM's "SpecDecoding metrics: Mean acceptance length: ..." line.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "runtime/core/stats/engine_stat_logger.hpp"

namespace troupe::stats {

class LoggingStatLogger final : public EngineStatLogger {
 public:
  using Clock = std::chrono::steady_clock;
  /// `sink` receives each line (default: the log facade at INFO); `now` is injectable for tests.
  explicit LoggingStatLogger(int engine_index = 0, std::function<void(const std::string&)> sink = {},
                             std::function<Clock::time_point()> now = {});
  void record(const SchedulerStats* scheduler_stats, const IterationStats* iteration_stats,
              int engine_index) override;
  void log() override;
  void log_engine_initialized() override;

  /// The line log() would print now (without resetting the interval).
  std::string format_line() const;
  /// The speculative decoding line log() would print now; empty when no draft was verified.
  std::string format_spec_decoding_line() const;

 private:
  int engine_index_;
  std::function<void(const std::string&)> sink_;
  std::function<Clock::time_point()> now_;
  Clock::time_point interval_start_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  SpecDecodingStats spec_;  // summed over the interval
  SchedulerStats last_{};
  bool idle_logged_ = false;
  int last_logged_sleep_level_ = 0;  // a change of sleep state is worth a line
};

}  // namespace troupe::stats
