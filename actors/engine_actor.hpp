// The engine actor: request intake and output streaming. It registers each
// submitted request, forwards it to the scheduler actor, turns every step's
// sampled tokens into text deltas for each caller (detokenization, stop
// strings), computes per-request stats and publishes one StatsEvent per step
// to the stat logger actor.
//   (submit_atom, SubmitRequest)              start a request (process-local callback inside)
//   (abort_atom, std::string id)              cancel it
//   (report_atom, StepReport)                 from the scheduler, once per step
//   (health_atom, bool, std::string)          from the scheduler when workers fail
#pragma once

#include <caf/actor.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/tokenizer/tokenizer.hpp"

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
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  caf::actor stat_logger;
  std::shared_ptr<EngineCounters> counters;
};

/// The scheduler is attached afterwards with (scheduler_atom-less) set_scheduler below,
/// because scheduler and engine actors refer to each other.
caf::actor spawn_engine_actor(caf::actor_system& system, EngineActorSetup setup);
void set_scheduler(caf::actor_system& system, const caf::actor& engine, const caf::actor& scheduler);

}  // namespace troupe::actors
