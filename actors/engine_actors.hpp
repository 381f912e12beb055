// The third part of starting an engine: given ranks whose model is loaded and
// whose KV cache is allocated, spawn the stat logger, engine and scheduler
// actors and wire them together. Engine::start calls it; tests call it with
// workers of their own.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/engine_actor.hpp"
#include "actors/messages.hpp"
#include "actors/stat_logger_actor.hpp"
#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/kv_cache_plan.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/config/engine_config.hpp"

namespace troupe::actors {

struct EngineActorsSetup {
  EngineConfig config;                                  // after the platform's check_and_update_config
  engine::KvCachePlan kv_plan;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::vector<worker_actor> workers;                    // rank order
  std::vector<std::string> rank_places;                 // where each rank runs ("node H:P"), for errors
  StatLoggerSetup stat_loggers;
  std::shared_ptr<EngineCounters> counters = std::make_shared<EngineCounters>();
  std::chrono::milliseconds step_timeout = std::chrono::minutes(10);
  /// The scheduler policy of config.scheduler.scheduler_cls; null: FCFS.
  std::shared_ptr<const SchedulerPolicy> policy;
};

struct EngineActors {
  stat_logger_actor stat_logger;
  engine_actor engine;
  scheduler_actor scheduler;
};

/// The EngineCore's configuration for `config` and `plan`.
engine::EngineCoreConfig core_config(const EngineConfig& config, const engine::KvCachePlan& plan);

EngineActors spawn_engine_actors(caf::actor_system& system, EngineActorsSetup setup);

}  // namespace troupe::actors
