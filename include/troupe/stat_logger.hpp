// StatLogger: receives every step's stats from the stat-logger actor
// (vLLM's StatLoggerBase). Built-in loggers and plugins implement it.
#pragma once

#include "troupe/config.hpp"
#include "troupe/stats.hpp"

namespace troupe {

class StatLogger {
 public:
  virtual ~StatLogger() = default;
  /// One step's stats; either pointer may be null when that part is absent.
  virtual void record(const SchedulerStats* scheduler_stats, const IterationStats* iteration_stats,
                      int engine_index) = 0;
  /// Called once per logging interval (default 5 s): emit what was gathered.
  virtual void log() = 0;
  /// Called once when the engine is ready (KV cache sized, model loaded).
  virtual void log_engine_initialized() {}
};

}  // namespace troupe
