// Example stat-logger plugin: sums what record() receives and, at each
// log() interval, appends one JSON object (one line) to $TROUPE_STAT_LOG_FILE.
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#include "troupe/log.hpp"
#include "troupe/plugin.hpp"

namespace {

class JsonlStatLogger final : public troupe::StatLogger {
 public:
  JsonlStatLogger(std::string path, int engine_index) : path_(std::move(path)), engine_index_(engine_index) {}

  // Reads the step by name (troupe/stat_logger.hpp): an engine that reports more numbers
  // needs no rebuild of this plugin.
  void record(const troupe::StepStatsView& step, int /*engine_index*/) override {
    auto count = [&](std::string_view name) { return static_cast<int64_t>(step.number(name).value_or(0)); };
    std::lock_guard lock(mu_);
    if (step.number("step")) ++steps_;
    running_ = count("num_running_reqs");
    waiting_ = count("num_waiting_reqs");
    kv_cache_usage_ = step.number("kv_cache_usage").value_or(kv_cache_usage_);
    sleep_level_ = count("sleep_level");
    prefix_queries_ += count("prefix_cache_queries");
    prefix_hits_ += count("prefix_cache_hits");
    preempted_ += count("num_preempted_reqs");
    prompt_tokens_ += count("num_prompt_tokens");
    generation_tokens_ += count("num_generation_tokens");
    finished_ += step.num_finished_requests();
  }

  void log() override {
    std::lock_guard lock(mu_);
    ++interval_;
    if (path_.empty()) {
      if (interval_ == 1) TROUPE_LOG_WARNING("stat_logger_jsonl: TROUPE_STAT_LOG_FILE is not set; nothing is written");
      reset();
      return;
    }
    std::ofstream out(path_, std::ios::app);
    if (!out) {
      TROUPE_LOG_WARNING("stat_logger_jsonl: cannot open {} for appending", path_);
      return;
    }
    out << fmt::format(
        "{{\"engine_index\": {}, \"interval\": {}, \"steps\": {}, \"prompt_tokens\": {}, "
        "\"generation_tokens\": {}, \"finished_requests\": {}, \"preempted_requests\": {}, "
        "\"prefix_cache_queries\": {}, \"prefix_cache_hits\": {}, \"running\": {}, \"waiting\": {}, "
        "\"kv_cache_usage\": {}, \"sleep_level\": {}}}\n",
        engine_index_, interval_, steps_, prompt_tokens_, generation_tokens_, finished_, preempted_, prefix_queries_,
        prefix_hits_, running_, waiting_, kv_cache_usage_, sleep_level_);
    reset();
  }

 private:
  // Counters cover one interval; gauges (running, waiting, kv usage) keep their last value.
  void reset() { steps_ = prompt_tokens_ = generation_tokens_ = finished_ = preempted_ = prefix_queries_ = prefix_hits_ = 0; }

  std::mutex mu_;
  std::string path_;
  int engine_index_;
  int64_t interval_ = 0;
  int64_t steps_ = 0, prompt_tokens_ = 0, generation_tokens_ = 0, finished_ = 0, preempted_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  int64_t running_ = 0, waiting_ = 0;
  double kv_cache_usage_ = 0.0;
  int64_t sleep_level_ = 0;
};

troupe::StatLogger* make_jsonl_logger(const troupe::ConfigView& /*config*/, int engine_index) {
  const char* path = std::getenv("TROUPE_STAT_LOG_FILE");
  return new JsonlStatLogger(path ? path : "", engine_index);
}

}  // namespace

TROUPE_PLUGIN(troupe::stat_logger_plugin("stat_logger_jsonl", &make_jsonl_logger))
