// The scheduler actor: owns the scheduling policy (runtime/sched) and drives
// the step loop: schedule → StepInput to the worker actors → sampled tokens →
// update → StepReport to the engine actor. New requests and aborts arrive as
// messages and take effect between steps.
//   (submit_atom, SamplingState, std::string cache_salt) -> bool   queue a request
//   (abort_atom, std::string id, std::string reason)                end it now ("abort" or "stop")
#pragma once

#include <caf/actor.hpp>

#include <cstdint>
#include <vector>

#include "runtime/sched/scheduler.hpp"

namespace troupe::actors {

struct SchedulerSetup {
  sched::SchedulerConfig config;
  sched::KvCacheConfig kv_config;
  std::vector<caf::actor> workers;   // rank order; rank 0 samples
  caf::actor engine;                 // receives (report_atom, StepReport) and (health_atom, bool, std::string)
  std::vector<int32_t> eog_ids;      // end-of-generation tokens of the vocabulary
};

caf::actor spawn_scheduler_actor(caf::actor_system& system, SchedulerSetup setup);

}  // namespace troupe::actors
