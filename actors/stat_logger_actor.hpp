// The stat_logger actor: receives one StatsEvent per engine step and feeds
// (a) the built-in logging stat logger (vLLM's periodic line), (b) the
// Prometheus stat logger, (c) every stat-logger plugin, and (d) subscribers:
// actors (local or remote) and process-local C++ callbacks. One for all data
// parallel replicas: each StatsEvent carries its replica's engine index.
// Interface: actors/messages.hpp, stat_logger_actor.
#pragma once

#include <caf/fwd.hpp>

#include <memory>
#include <vector>

#include "actors/messages.hpp"

#include "runtime/core/stats/engine_stat_logger.hpp"

namespace troupe::actors {

struct StatLoggerSetup {
  std::vector<std::unique_ptr<stats::EngineStatLogger>> loggers;  // called in order on every step and interval
  double log_interval_s = 5.0;                       // <= 0: log() never called periodically
};

stat_logger_actor spawn_stat_logger_actor(caf::actor_system& system, StatLoggerSetup setup);

}  // namespace troupe::actors
