// The third part of starting an engine: given ranks whose model is loaded and
// whose KV cache is allocated, spawn the stat logger and scheduler actors and
// wire them to the engine's OutputRouter (no actor relays outputs to callers). Engine::start calls it; tests call it with
// workers of their own. With data parallel replicas: one scheduler per replica and
// the router actor in front of them.
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
#include "runtime/core/kv_events/kv_event_publisher.hpp"
#include "troupe/routing/routing_policy.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/config/engine_config.hpp"

namespace troupe::actors {

/// One replica's ranks as its scheduler drives them.
struct ReplicaWorkers {
  std::vector<worker_actor> workers;     // rank order
  std::vector<std::string> rank_places;  // for errors ("replica 1, node H:P")
  engine::KvCachePlan kv_plan;
};

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
  /// Data parallel replicas, in index order; empty: one, of `workers`, `rank_places`, `kv_plan`.
  std::vector<ReplicaWorkers> replicas;
  /// With several replicas: the routing policy and its name (the router actor's).
  std::unique_ptr<routing::RoutingPolicy> routing_policy;
  std::string routing_policy_name;
  /// Set: every replica's KV events go out (--kv-events-config).
  std::shared_ptr<engine::KvEventPublisher> kv_publisher;
};

struct EngineActors {
  stat_logger_actor stat_logger;
  scheduler_actor scheduler;                 // replica 0's
  std::vector<scheduler_actor> schedulers;   // every replica's, in index order
  dp_router_actor router;                    // with several replicas: where requests go
};

/// The EngineCore's configuration for `config` and `plan`.
engine::EngineCoreConfig core_config(const EngineConfig& config, const engine::KvCachePlan& plan);

EngineActors spawn_engine_actors(caf::actor_system& system, EngineActorsSetup setup);

}  // namespace troupe::actors
