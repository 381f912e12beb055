// The engine's side of stat logging. Its own loggers (the logging line,
// Prometheus) read the engine's structs (engine_stats.hpp) through
// EngineStatLogger; a stat-logger plugin implements the SDK's StatLogger,
// which sees each step only as a StepStatsView by name (step_stats_view.hpp),
// so the structs may change in any release without touching a plugin.
// PluginStatLogger puts a plugin behind the engine's interface.
#pragma once

#include <memory>
#include <vector>

#include "runtime/core/stats/engine_stats.hpp"
#include "runtime/core/stats/step_stats_view.hpp"
#include "troupe/stat_logger.hpp"

namespace troupe::stats {

class EngineStatLogger {
 public:
  virtual ~EngineStatLogger() = default;
  /// One step's stats; either pointer may be null when that part is absent.
  virtual void record(const SchedulerStats* scheduler_stats, const IterationStats* iteration_stats,
                      int engine_index) = 0;
  /// Called once per logging interval: emit what was gathered.
  virtual void log() = 0;
  /// Called once when the engine is ready (KV cache sized, model loaded).
  virtual void log_engine_initialized() {}
};

/// A stat-logger plugin's StatLogger, fed each step as a StepStats view.
class PluginStatLogger final : public EngineStatLogger {
 public:
  explicit PluginStatLogger(std::unique_ptr<StatLogger> plugin) : plugin_(std::move(plugin)) {}
  void record(const SchedulerStats* s, const IterationStats* it, int engine_index) override {
    plugin_->record(StepStats(s, it), engine_index);
  }
  void log() override { plugin_->log(); }
  void log_engine_initialized() override { plugin_->log_engine_initialized(); }

 private:
  std::unique_ptr<StatLogger> plugin_;
};

/// One logger per engine (data parallel replica), as vLLM makes its per-engine loggers:
/// record() goes to the logger of its engine index (an index without one is dropped),
/// log() and log_engine_initialized() to all of them.
class PerEngineStatLogger final : public EngineStatLogger {
 public:
  explicit PerEngineStatLogger(std::vector<std::unique_ptr<EngineStatLogger>> by_engine)
      : by_engine_(std::move(by_engine)) {}
  void record(const SchedulerStats* s, const IterationStats* it, int engine_index) override {
    if (engine_index >= 0 && static_cast<size_t>(engine_index) < by_engine_.size() && by_engine_[engine_index])
      by_engine_[engine_index]->record(s, it, engine_index);
  }
  void log() override {
    for (auto& l : by_engine_)
      if (l) l->log();
  }
  void log_engine_initialized() override {
    for (auto& l : by_engine_)
      if (l) l->log_engine_initialized();
  }

 private:
  std::vector<std::unique_ptr<EngineStatLogger>> by_engine_;
};

}  // namespace troupe::stats
