// The third part of starting an engine: given ranks whose model is loaded and
// whose KV cache is allocated, spawn the stat logger and scheduler actors and
// wire them to the engine's OutputRouter (no actor relays outputs to callers). Engine::start calls it; tests call it with
// workers of their own.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/stat_logger_actor.hpp"
#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/kv_cache_plan.hpp"
#include "runtime/core/engine_core/output_router.hpp"
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
  /// Where outputs go (the callers' callbacks) and the counters Engine's getters read.
  std::shared_ptr<engine::OutputRouter> router = std::make_shared<engine::OutputRouter>();
  std::chrono::milliseconds step_timeout = std::chrono::minutes(10);
  /// The scheduler policy of config.scheduler.scheduler_cls; null: FCFS.
  std::shared_ptr<const SchedulerPolicy> policy;
};

struct EngineActors {
  stat_logger_actor stat_logger;
  scheduler_actor scheduler;
};

/// The EngineCore's configuration for `config` and `plan`.
engine::EngineCoreConfig core_config(const EngineConfig& config, const engine::KvCachePlan& plan);

EngineActors spawn_engine_actors(caf::actor_system& system, EngineActorsSetup setup);

}  // namespace troupe::actors
