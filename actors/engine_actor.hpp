// The engine actor: request intake and output delivery. It keeps each
// caller's process-local callback, forwards requests and aborts to the
// scheduler actor, and for every batch of EngineCore outputs publishes the
// step's stats to the stat logger, then delivers each delta to its caller.
// Interface: actors/messages.hpp, engine_actor.
#pragma once

#include <caf/fwd.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "actors/messages.hpp"

namespace troupe::actors {

/// Numbers the engine actor keeps current for Engine's synchronous getters.
struct EngineCounters {
  std::atomic<int64_t> in_flight{0};          // submitted and not yet finished
  std::atomic<int64_t> max_running{0};        // most requests that ran in one step
  std::atomic<bool> healthy{true};
  std::mutex mu;
  std::string unhealthy_reason;
};

struct EngineActorSetup {
  stat_logger_actor stat_logger;
  std::shared_ptr<EngineCounters> counters;
  std::chrono::milliseconds scheduler_timeout = std::chrono::seconds(30);
};

/// The scheduler is attached afterwards with (scheduler_atom, scheduler_actor):
/// scheduler and engine actors refer to each other.
engine_actor spawn_engine_actor(caf::actor_system& system, EngineActorSetup setup);

}  // namespace troupe::actors
