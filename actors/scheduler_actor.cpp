#include "actors/scheduler_actor.hpp"

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "actors/status_error.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct SchedulerState {
  std::shared_ptr<SchedulerSetup> setup;
  std::unique_ptr<engine::EngineCore> core;
  std::unique_ptr<engine::Executor> executor;
  std::vector<worker_actor> workers;
  // Cores replaced by a reset while a step was in flight: kept until that
  // step's answer (or its timeout) has come back, since it calls into them.
  std::vector<std::pair<std::unique_ptr<engine::EngineCore>, std::unique_ptr<engine::Executor>>> retired;
  uint64_t generation = 0;  // of the current core; a retired core's late outputs are dropped
  bool weights_asleep = false, kv_asleep = false;  // sleep mode: the parts not woken yet
  static inline const char* name = "troupe.scheduler";
};

using Self = scheduler_actor::stateful_pointer<SchedulerState>;

/// Runs a step on every rank's worker actor: one request per rank with a
/// finite timeout. Completes with the driver's output once every rank has
/// answered, or with the first failure (naming the rank).
class FanOutExecutor final : public engine::Executor {
 public:
  FanOutExecutor(Self self, std::vector<worker_actor> workers, std::vector<std::string> names,
                 std::chrono::milliseconds timeout)
      : self_(self), workers_(std::move(workers)), names_(std::move(names)), timeout_(timeout) {}

  void execute(StepInput input, Done done) override {
    struct Round {
      Done done;
      size_t pending = 0;
      bool finished = false;
      std::optional<StepOutput> driver;
      int64_t bytes = 0;       // every rank's communication
      double seconds = 0;
    };
    auto round = std::make_shared<Round>();
    round->done = std::move(done);
    round->pending = workers_.size();
    const auto timeout = timeout_;
    for (size_t r = 0; r < workers_.size(); ++r) {
      const std::string who = names_[r];
      self_->request(workers_[r], timeout, execute_atom_v, input)
          .then(
              [round, r](StepOutput& out) {
                if (round->finished) return;
                round->bytes += out.communicator_bytes;
                round->seconds = std::max(round->seconds, out.communicator_seconds);
                if (r == 0) round->driver = std::move(out);
                if (--round->pending > 0) return;
                round->finished = true;
                round->driver->communicator_bytes = round->bytes;
                round->driver->communicator_seconds = round->seconds;
                round->done(std::move(*round->driver));
              },
              [round, who, timeout](caf::error& err) {
                if (round->finished) return;
                round->finished = true;
                if (err == caf::sec::request_timeout)
                  round->done(unavailable(who + " did not answer the step within " +
                                          std::to_string(timeout.count()) + " ms"));
                else
                  round->done(to_status(err, who));
              });
    }
  }

 private:
  Self self_;
  std::vector<worker_actor> workers_;
  std::vector<std::string> names_;  // "the worker of rank 1 (node 10.0.0.2:7000)"
  std::chrono::milliseconds timeout_;
};

std::string worker_name(const SchedulerSetup& setup, size_t rank) {
  std::string name = "the worker of rank " + std::to_string(rank);
  if (rank < setup.rank_places.size() && !setup.rank_places[rank].empty())
    name += " (" + setup.rank_places[rank] + ")";
  return name;
}

/// Sends `message` to every worker (finite timeout) and calls done(total of the replies, or
/// the first failure naming the rank) once every rank answered.
template <class Reply, class... Ts>
void fan_out(Self self, std::function<void(Result<int64_t>)> done, Ts... message) {
  auto& st = self->state;
  struct Round {
    std::function<void(Result<int64_t>)> done;
    size_t pending = 0;
    bool finished = false;
    int64_t total = 0;
  };
  auto round = std::make_shared<Round>();
  round->done = std::move(done);
  round->pending = st.workers.size();
  for (size_t r = 0; r < st.workers.size(); ++r) {
    const std::string who = worker_name(*st.setup, r);
    self->request(st.workers[r], st.setup->step_timeout, message...)
        .then(
            [round](Reply value) {
              if (round->finished) return;
              if constexpr (std::is_same_v<Reply, int64_t>) round->total += value;
              if (--round->pending > 0) return;
              round->finished = true;
              round->done(round->total);
            },
            [round, who](caf::error& err) {
              if (round->finished) return;
              round->finished = true;
              round->done(to_status(err, who));
            });
  }
}

void run_step(Self self) {
  auto& st = self->state;
  std::erase_if(st.retired, [](const auto& r) { return !r.first->step_in_flight(); });
  if (st.core->step(*st.executor) == engine::StepStatus::blocked)
    self->delayed_send(self, std::chrono::milliseconds(5), step_atom_v);  // nothing fits now; try again shortly
}

/// A core over `workers` (a fresh one: no requests, empty KV bookkeeping).
void install_core(Self self, std::vector<worker_actor> workers) {
  auto& st = self->state;
  const auto& setup = *st.setup;
  for (auto& w : st.workers) self->demonitor(w.address());
  st.workers = std::move(workers);
  std::vector<std::string> names;
  for (size_t r = 0; r < st.workers.size(); ++r) names.push_back(worker_name(setup, r));
  if (st.core && st.core->step_in_flight()) st.retired.emplace_back(std::move(st.core), std::move(st.executor));
  st.executor = std::make_unique<FanOutExecutor>(self, st.workers, std::move(names), setup.step_timeout);
  engine_actor engine = setup.engine;
  const uint64_t generation = ++st.generation;
  st.core = std::make_unique<engine::EngineCore>(setup.core, setup.tokenizer, [self, engine, generation](
                                                                                  EngineCoreOutputs out) {
    if (generation != self->state.generation) return;  // a retired core: its requests have ended already
    self->send(engine, outputs_atom_v, std::move(out));
    self->send(self, step_atom_v);  // the next step, if there is work (a no-op otherwise)
  });
  for (auto& w : st.workers) self->monitor(w);
}

scheduler_actor::behavior_type scheduler_behavior(Self self, std::shared_ptr<SchedulerSetup> setup) {
  self->state.setup = setup;
  install_core(self, setup->workers);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t r = 0; r < st.workers.size(); ++r)
      if (st.workers[r].address() == dm.source)
        st.core->fail_all(unavailable(
            worker_name(*st.setup, r) +
            (dm.reason == caf::exit_reason::remote_link_unreachable
                 ? " is unreachable: the connection to its node was lost (killed, or its heartbeats stopped)"
                 : " died: " + self->system().render(dm.reason))));
  });
  return {
      [=](submit_atom, CoreRequest& request) -> caf::result<bool> {
        if (auto s = self->state.core->add_request(std::move(request)); !s) return to_error(s);
        self->send(self, step_atom_v);  // after the other submits already queued: they join this step
        return true;
      },
      [=](abort_atom, const std::string& id) { (void)self->state.core->abort_request(id); },
      [=](step_atom) { run_step(self); },
      [=](sleep_atom, int32_t level) -> caf::result<int64_t> {
        auto& core = *self->state.core;
        if (level != 1 && level != 2)
          return to_error(invalid_argument("sleep level must be 1 or 2, got " + std::to_string(level)));
        if (!core.healthy()) return to_error(unavailable("the engine is unhealthy: " + core.health().message()));
        if (core.has_unfinished_requests() || core.step_in_flight())
          return to_error(unavailable("the engine cannot sleep while requests are unfinished (" +
                                      std::to_string(core.stats().num_running_reqs) + " running, " +
                                      std::to_string(core.stats().num_waiting_reqs) +
                                      " waiting): finish or abort them first"));
        core.set_sleep_level(level);  // no step starts from now on; requests wait
        self->state.weights_asleep = self->state.kv_asleep = true;
        auto promise = self->make_response_promise<int64_t>();
        fan_out<int64_t>(
            self,
            [self, promise, level](Result<int64_t> freed) mutable {
              if (!freed.ok()) {
                promise.deliver(to_error(freed.status()));
                return;
              }
              TROUPE_LOG_INFO("the engine sleeps at level {}: {:.1f} MiB of resident memory freed", level,
                              static_cast<double>(*freed) / (1 << 20));
              promise.deliver(*freed);
            },
            sleep_atom_v, level);
        return promise;
      },
      [=](wake_atom, const std::string& tags) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        const bool weights = tags.empty() || tags.find("weights") != std::string::npos;
        const bool kv = tags.empty() || tags.find("kv_cache") != std::string::npos;
        fan_out<bool>(
            self,
            [self, promise, weights, kv](Result<int64_t> woke) mutable {
              if (!woke.ok()) {
                promise.deliver(to_error(woke.status()));
                return;
              }
              auto& st = self->state;
              if (weights) st.weights_asleep = false;
              if (kv) st.kv_asleep = false;
              if (!st.weights_asleep && !st.kv_asleep && st.core->sleep_level() != 0) {
                self->state.core->set_sleep_level(0);
                TROUPE_LOG_INFO("the engine is awake");
                self->send(self, step_atom_v);  // requests that waited run now
              }
              promise.deliver(true);
            },
            wake_atom_v, tags);
        return promise;
      },
      [=](sleeping_atom) -> int32_t { return self->state.core->sleep_level(); },
      [=](lora_add_atom, int64_t id, const std::string& path) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        fan_out<bool>(
            self,
            [self, promise, id](Result<int64_t> added) mutable {
              Status st = added.status();
              if (st.ok()) st = self->state.core->add_lora(id);
              if (!st.ok()) {
                // Some ranks may hold it: drop it there again (a rank without it answers not_found).
                for (auto& w : self->state.workers)
                  self->request(w, self->state.setup->step_timeout, lora_rm_atom_v, id)
                      .then([](bool) {}, [](caf::error&) {});
                promise.deliver(to_error(st));
                return;
              }
              promise.deliver(true);
            },
            lora_add_atom_v, id, path);
        return promise;
      },
      [=](lora_rm_atom, int64_t id) -> caf::result<bool> {
        // Refused while requests use it; from now on no request can name it.
        if (Status st = self->state.core->remove_lora(id); !st.ok()) return to_error(st);
        auto promise = self->make_response_promise<bool>();
        fan_out<bool>(
            self,
            [promise](Result<int64_t> removed) mutable {
              if (!removed.ok()) promise.deliver(to_error(removed.status()));
              else promise.deliver(true);
            },
            lora_rm_atom_v, id);
        return promise;
      },
      [=](reset_atom, std::vector<worker_actor>& workers) -> bool {
        auto& st = self->state;
        if (st.core->healthy() && st.core->has_unfinished_requests())
          st.core->fail_all(unavailable("the engine restarted its ranks"));
        install_core(self, std::move(workers));
        EngineCoreOutputs healthy;  // tells the engine actor (and /health) it serves again
        self->send(st.setup->engine, outputs_atom_v, std::move(healthy));
        TROUPE_LOG_INFO("the engine serves again on {} rank(s)", st.workers.size());
        return true;
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler_actor(caf::actor_system& system, SchedulerSetup setup) {
  return system.spawn(scheduler_behavior, std::make_shared<SchedulerSetup>(std::move(setup)));
}

}  // namespace troupe::actors
