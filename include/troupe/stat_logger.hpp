// StatLogger: what a stat-logger plugin implements (vLLM's StatLoggerBase).
// The stat-logger actor calls it with every step's stats as a read-only view
// by name, not as the engine's structs: the engine may report new numbers in
// any release without touching a plugin. The names are listed in
// docs/plugins.md ("Engine data crosses as views"); they only ever grow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// One engine step's numbers.
class StepStatsView {
 public:
  /// A number of the step by name, or nullopt when the engine has none by that name:
  /// the scheduler's ("num_running_reqs", "kv_cache_usage", "prefix_cache_hits", ...),
  /// the step's tokens ("num_prompt_tokens", "num_generation_tokens") and speculative
  /// decoding's ("spec_decoding.num_drafts", ...).
  virtual std::optional<double> number(std::string_view name) const = 0;
  /// Every name number() answers, sorted.
  virtual std::vector<std::string> number_names() const = 0;
  /// A list of numbers by name ("time_to_first_tokens_s", "inter_token_latencies_s",
  /// "spec_decoding.num_accepted_tokens_per_pos"); empty when absent.
  virtual std::vector<double> series(std::string_view name) const = 0;

  /// The requests that finished in this step, 0 .. num_finished_requests() - 1: their
  /// numbers ("num_prompt_tokens", "e2e_latency_s", "time_to_first_token_s", ...) and
  /// texts ("request_id", "finish_reason"; "" when absent).
  virtual int64_t num_finished_requests() const = 0;
  virtual std::optional<double> finished_number(int64_t index, std::string_view name) const = 0;
  virtual std::string finished_text(int64_t index, std::string_view name) const = 0;

 protected:
  ~StepStatsView() = default;
};

class StatLogger {
 public:
  virtual ~StatLogger() = default;
  /// One step's stats; `step` lives only for the call.
  virtual void record(const StepStatsView& step, int engine_index) = 0;
  /// Called once per logging interval (default 5 s): emit what was gathered.
  virtual void log() = 0;
  /// Called once when the engine is ready (KV cache sized, model loaded).
  virtual void log_engine_initialized() {}
};

}  // namespace troupe
