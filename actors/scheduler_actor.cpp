#include "actors/scheduler_actor.hpp"

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "actors/rank_group.hpp"
#include "actors/status_error.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct SchedulerState;
using Self = scheduler_actor::stateful_pointer<SchedulerState>;
using RankExecutor = AsyncRankExecutor<Self>;

struct SchedulerState {
  std::shared_ptr<SchedulerSetup> setup;
  std::unique_ptr<engine::EngineCore> core;
  std::unique_ptr<RankExecutor> executor;
  // Cores replaced by a reset while a step was in flight: kept until that
  // step's answer (or its timeout) has come back, since it calls into them.
  std::vector<std::pair<std::unique_ptr<engine::EngineCore>, std::unique_ptr<RankExecutor>>> retired;
  uint64_t generation = 0;  // of the current core; a retired core's late outputs are dropped
  bool sleep_timer_armed = false;  // a tick is due: it ends requests that waited too long while asleep
  // The ranks' answers' one timer (AsyncRankExecutor): when it is due, if armed.
  std::optional<std::chrono::steady_clock::time_point> watchdog_due;
  // Outputs the core emitted, for the next deliver_atom (queued behind the next step's message).
  std::vector<EngineCoreOutputs> undelivered;
  static inline const char* name = "troupe.scheduler";
};

const std::vector<worker_actor>& rank_workers(Self self) { return self->state.executor->group().workers; }

/// The promise's answer once `result` comes (a Status or Result<T>).
template <class T>
void deliver(caf::typed_response_promise<T>& promise, const Result<T>& result) {
  if (!result.ok()) promise.deliver(to_error(result.status()));
  else promise.deliver(result.value());
}
void deliver(caf::typed_response_promise<bool>& promise, const Status& status) {
  if (!status.ok()) promise.deliver(to_error(status));
  else promise.deliver(true);
}

void run_step(Self self) {
  auto& st = self->state;
  std::erase_if(st.retired, [](const auto& r) { return !r.first->step_in_flight(); });
  // Blocked (nothing fits) needs no timer: whatever can make room arrives as a message
  // (submit, abort, LoRA, wake-up) or a step's completion, and each of those steps again.
  const auto status = st.core->step(*st.executor);
  if (status == engine::StepStatus::asleep && !st.sleep_timer_armed) {
    const auto left = st.core->sleep_wait_left(engine::EngineCore::Clock::now());
    if (!left) return;
    st.sleep_timer_armed = true;
    // Rounded up so the tick finds the first request past its limit.
    self->delayed_send(self, std::chrono::ceil<std::chrono::milliseconds>(*left) + std::chrono::milliseconds(1),
                       tick_atom_v);
  }
}

/// One watchdog message `delay` from now, unless one is due before that.
void arm_watchdog(Self self, std::chrono::milliseconds delay) {
  auto& st = self->state;
  const auto due = std::chrono::steady_clock::now() + delay;
  if (st.watchdog_due && *st.watchdog_due <= due) return;
  st.watchdog_due = due;
  self->delayed_send(self, delay, watchdog_atom_v);
}

/// The watchdog: fails the rank rounds past their deadline, in the current core's
/// executor and in those of retired cores still waiting, and re-arms for the next.
void on_watchdog(Self self) {
  auto& st = self->state;
  const auto now = std::chrono::steady_clock::now();
  if (st.watchdog_due && *st.watchdog_due > now) return;  // an earlier message; the later one is coming
  st.watchdog_due.reset();
  std::optional<std::chrono::steady_clock::time_point> next;
  auto take = [&](RankExecutor& ex) {
    if (auto n = ex.expire(now); n && (!next || *n < *next)) next = n;
  };
  if (st.executor) take(*st.executor);
  for (auto& r : st.retired)
    if (r.second) take(*r.second);
  if (next)
    arm_watchdog(self, std::chrono::ceil<std::chrono::milliseconds>(*next - now) + std::chrono::milliseconds(1));
}

/// Tells the router and the publisher what `out` changed: the replica's load, its KV
/// events, the requests that ended (`also_finished`: ones the core refused) and its health.
void report(Self self, EngineCoreOutputs& out, std::vector<std::string> also_finished = {}) {
  const auto& setup = *self->state.setup;
  if (setup.kv_publisher && !out.kv_events.empty()) setup.kv_publisher->publish(setup.replica, out.kv_events);
  if (!setup.router_actor) return;
  ReplicaUpdate u;
  u.replica = setup.replica;
  u.has_stats = out.has_stats;
  if (out.has_stats) {
    u.num_running = out.stats.scheduler.num_running_reqs;
    u.num_waiting = out.stats.scheduler.num_waiting_reqs;
    u.kv_cache_usage = out.stats.scheduler.kv_cache_usage;
    for (const auto& f : out.stats.iteration.finished_requests) u.finished_ids.push_back(f.request_id);
  }
  for (auto& id : also_finished) u.finished_ids.push_back(std::move(id));
  u.kv_events = std::move(out.kv_events);
  u.health = out.health;
  self->send(setup.router_actor, replica_atom_v, std::move(u));
}

/// A core over `workers` (a fresh one: no requests, empty KV bookkeeping).
void install_core(Self self, std::vector<worker_actor> workers) {
  auto& st = self->state;
  const auto& setup = *st.setup;
  if (st.executor)
    for (auto& w : st.executor->group().workers) self->demonitor(w.address());
  if (st.core && st.core->step_in_flight()) st.retired.emplace_back(std::move(st.core), std::move(st.executor));
  st.executor = std::make_unique<RankExecutor>(self, RankGroup{std::move(workers), setup.rank_places, setup.step_timeout},
                                               [self](std::chrono::milliseconds delay) { arm_watchdog(self, delay); });
  const uint64_t generation = ++st.generation;
  st.core = std::make_unique<engine::EngineCore>(setup.core, setup.tokenizer, [self, generation](
                                                                                  EngineCoreOutputs out) {
    if (generation != self->state.generation) return;  // a retired core: its requests have ended already
    // Stats first, outputs second: a caller that saw its request finish finds that step
    // sent to the stat logger already.
    out.stats.engine_index = self->state.setup->replica;
    report(self, out);
    if (out.has_stats) self->send(self->state.setup->stat_logger, stats_atom_v, std::move(out.stats));
    // The next step (if there is work) before the callbacks: its ranks compute while they run.
    self->state.undelivered.push_back(std::move(out));
    self->send(self, step_atom_v);
    self->send(self, deliver_atom_v);
  });
  for (auto& w : st.executor->group().workers) self->monitor(w);
}

scheduler_actor::behavior_type scheduler_behavior(Self self, std::shared_ptr<SchedulerSetup> setup) {
  self->state.setup = setup;
  install_core(self, setup->workers);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    const auto& ws = rank_workers(self);
    for (size_t r = 0; r < ws.size(); ++r)
      if (ws[r].address() == dm.source)
        st.core->fail_lost(unavailable(
            st.executor->group().name(r) +
            (dm.reason == caf::exit_reason::remote_link_unreachable
                 ? " is unreachable: the connection to its node was lost (killed, or its heartbeats stopped)"
                 : " died: " + self->system().render(dm.reason))));
  });
  return {
      [=](submit_atom, CoreRequest& request) {
        std::string id = request.request_id;
        if (Status s = self->state.core->add_request(std::move(request)); !s.ok()) {
          self->state.setup->router->fail(id, s);
          EngineCoreOutputs none;
          none.health = self->state.core->health();
          report(self, none, {id});
          return;
        }
        self->send(self, step_atom_v);  // after the other submits already queued: they join this step
      },
      [=](abort_atom, const std::string& id) {
        if (self->state.core->abort_request(id)) self->send(self, step_atom_v);  // its blocks may let others in
      },
      [=](step_atom) { run_step(self); },
      [=](tick_atom) {
        self->state.sleep_timer_armed = false;
        run_step(self);
      },
      [=](watchdog_atom) { on_watchdog(self); },
      [=](deliver_atom) {
        auto batches = std::move(self->state.undelivered);
        self->state.undelivered.clear();
        for (auto& batch : batches) self->state.setup->router->deliver(batch, self->state.setup->replica);
      },
      [=](sleep_atom, int32_t level) -> caf::result<int64_t> {
        auto promise = self->make_response_promise<int64_t>();
        self->state.core->sleep(*self->state.executor, level,
                                [promise](Result<int64_t> freed) mutable { deliver(promise, freed); });
        return promise;
      },
      [=](wake_atom, std::vector<std::string>& tags) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        self->state.core->wake_up(*self->state.executor, std::move(tags), [self, promise](Result<bool> awake) mutable {
          if (awake.ok() && *awake) self->send(self, step_atom_v);  // requests that waited run now
          deliver(promise, awake.status());
        });
        return promise;
      },
      [=](sleeping_atom) -> int32_t { return self->state.core->sleep_level(); },
      [=](lora_add_atom, int64_t id, std::string& path) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        self->state.core->add_lora(*self->state.executor, id, std::move(path),
                                   [promise](Status added) mutable { deliver(promise, added); });
        return promise;
      },
      [=](lora_rm_atom, int64_t id) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        self->state.core->remove_lora(*self->state.executor, id,
                                      [promise](Status removed) mutable { deliver(promise, removed); });
        return promise;
      },
      [=](reset_atom, std::vector<worker_actor>& workers) -> bool {
        auto& st = self->state;
        if (st.core->healthy() && st.core->has_unfinished_requests())
          st.core->fail_lost(unavailable("the engine restarted its ranks"));
        install_core(self, std::move(workers));
        // The fresh core's prefix cache is empty: external routers and ours forget the old one.
        EngineCoreOutputs fresh;
        fresh.kv_events.push_back(sched::AllBlocksCleared{});
        report(self, fresh);
        // Tells the router (and /health) it serves again, after what the old core's end queued.
        st.undelivered.emplace_back();
        self->send(self, deliver_atom_v);
        TROUPE_LOG_INFO("the engine serves again on {} rank(s)", rank_workers(self).size());
        return true;
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler_actor(caf::actor_system& system, SchedulerSetup setup) {
  return system.spawn(scheduler_behavior, std::make_shared<SchedulerSetup>(std::move(setup)));
}

}  // namespace troupe::actors
