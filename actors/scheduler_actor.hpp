// The scheduler actor: a mailbox around the engine::EngineCore. Requests and
// aborts arrive as messages and take effect between steps; each step goes to
// every rank's worker actor (a fan-out of requests with a finite timeout) and
// completes when every rank has answered. Outputs go straight to the engine's
// OutputRouter (the callers' callbacks, called on this actor's thread), each
// step's stats to the stat logger first.
// After lost ranks were rebuilt, (reset_atom, workers) starts a fresh core.
// With data parallel replicas there is one per replica: it tags its stats with
// the replica's index and reports to the router actor after each output.
// Interface: actors/messages.hpp, scheduler_actor.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/output_router.hpp"
#include "runtime/core/kv_events/kv_event_publisher.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"

namespace troupe::actors {

struct SchedulerSetup {
  engine::EngineCoreConfig core;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::vector<worker_actor> workers;   // rank order; rank 0 is the driver and samples
  /// Where each rank runs, for error messages ("node 10.0.0.2:7000"); empty: this process.
  std::vector<std::string> rank_places;
  /// Receives every batch of outputs (and a request the core refuses, as an error).
  std::shared_ptr<engine::OutputRouter> router;
  stat_logger_actor stat_logger;       // receives each step's stats
  /// A rank that has not answered a step by then fails it (a long prefill on a
  /// small CPU can take seconds, so the default is generous).
  std::chrono::milliseconds step_timeout = std::chrono::minutes(10);
  /// The replica (data parallel rank) this scheduler runs: its stats' engine index.
  int32_t replica = 0;
  /// Set with several replicas: hears of this replica's load, KV events, finished requests
  /// and health after each output (engine::ReplicaUpdate).
  dp_router_actor router_actor;
  /// Set with --kv-events-config: this replica's KV events go out in vLLM's wire format.
  std::shared_ptr<engine::KvEventPublisher> kv_publisher;
};

scheduler_actor spawn_scheduler_actor(caf::actor_system& system, SchedulerSetup setup);

}  // namespace troupe::actors
