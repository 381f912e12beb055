#include "actors/engine_actor.hpp"

#include <caf/all.hpp>

#include <unordered_map>

#include "actors/status_error.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct EngineActorState {
  EngineActorState() = default;  // not an aggregate: CAF must not build it from the actor pointer
  scheduler_actor scheduler;
  stat_logger_actor stat_logger;
  std::shared_ptr<EngineCounters> counters;
  std::chrono::milliseconds scheduler_timeout{0};
  std::unordered_map<std::string, OutputCallback> callbacks;  // request id → its caller
  static inline const char* name = "troupe.engine";
};

using Self = engine_actor::stateful_pointer<EngineActorState>;

/// Hands one delta to its caller; the last one ends the request here.
void deliver(Self self, engine::RequestOutput out) {
  auto& st = self->state;
  auto it = st.callbacks.find(out.request_id);
  if (it == st.callbacks.end()) return;
  const bool finished = out.finished;
  try {
    it->second(std::move(out));
  } catch (const std::exception& e) {  // a caller's callback must not take the engine down
    TROUPE_LOG_ERROR("output callback of request {} threw: {}", it->first, e.what());
  }
  if (finished) {
    st.callbacks.erase(it);
    st.counters->in_flight--;
  }
}

void on_outputs(Self self, EngineCoreOutputs& batch) {
  auto& st = self->state;
  auto& c = *st.counters;
  // Lost, back after the ranks were rebuilt, or a better reason (the node actually lost
  // replaces a surviving rank's failed step: EngineCore::fail_lost).
  if (batch.health.ok() != c.healthy.load() || !batch.health.ok()) {
    std::lock_guard lock(c.mu);
    c.healthy = batch.health.ok();
    c.unhealthy_reason = batch.health.message();
  }
  for (int64_t cur = c.max_running.load();
       batch.num_scheduled_requests > cur && !c.max_running.compare_exchange_weak(cur, batch.num_scheduled_requests);) {
  }
  // Stats first, outputs second: a caller that saw its request finish also
  // finds that step in the stats (subscribers are never behind the outputs).
  if (batch.has_stats)
    self->send(st.stat_logger, stats_atom_v, std::move(batch.stats));
  for (auto& out : batch.outputs) deliver(self, std::move(out));
}

engine_actor::behavior_type engine_behavior(Self self, std::shared_ptr<EngineActorSetup> setup) {
  auto& st = self->state;
  st.stat_logger = setup->stat_logger;
  st.counters = setup->counters;
  st.scheduler_timeout = setup->scheduler_timeout;
  return {
      [=](scheduler_atom, scheduler_actor& scheduler) { self->state.scheduler = std::move(scheduler); },
      [=](submit_atom, SubmitRequest& req) {
        auto& st = self->state;
        std::string id = req.request.request_id;
        st.callbacks[id] = std::move(req.on_output);
        self->request(st.scheduler, st.scheduler_timeout, submit_atom_v, std::move(req.request))
            .then([](bool) {},
                  [=](caf::error& err) {
                    engine::RequestOutput out;
                    out.request_id = id;
                    out.finished = true;
                    out.finish_reason = FinishReason::error;
                    out.error = to_status(err, "the scheduler refused the request");
                    deliver(self, std::move(out));
                  });
      },
      [=](abort_atom, const std::string& id) {
        // The scheduler ends it and its final delta comes back with the outputs.
        if (self->state.callbacks.contains(id)) self->send(self->state.scheduler, abort_atom_v, id);
      },
      [=](outputs_atom, EngineCoreOutputs& batch) { on_outputs(self, batch); },
  };
}

}  // namespace

engine_actor spawn_engine_actor(caf::actor_system& system, EngineActorSetup setup) {
  return system.spawn(engine_behavior, std::make_shared<EngineActorSetup>(std::move(setup)));
}

}  // namespace troupe::actors
