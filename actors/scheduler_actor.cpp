#include "actors/scheduler_actor.hpp"

#include <caf/all.hpp>

#include <optional>

#include "actors/status_error.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct SchedulerState {
  std::unique_ptr<engine::EngineCore> core;
  std::unique_ptr<engine::Executor> executor;
  std::vector<worker_actor> workers;
  static inline const char* name = "troupe.scheduler";
};

using Self = scheduler_actor::stateful_pointer<SchedulerState>;

/// Runs a step on every rank's worker actor: one request per rank with a
/// finite timeout. Completes with the driver's output once every rank has
/// answered, or with the first failure (naming the rank).
class FanOutExecutor final : public engine::Executor {
 public:
  FanOutExecutor(Self self, std::vector<worker_actor> workers, std::chrono::milliseconds timeout)
      : self_(self), workers_(std::move(workers)), timeout_(timeout) {}

  void execute(StepInput input, Done done) override {
    struct Round {
      Done done;
      size_t pending = 0;
      bool finished = false;
      std::optional<StepOutput> driver;
    };
    auto round = std::make_shared<Round>();
    round->done = std::move(done);
    round->pending = workers_.size();
    const auto timeout = timeout_;
    for (size_t r = 0; r < workers_.size(); ++r) {
      self_->request(workers_[r], timeout, execute_atom_v, input)
          .then(
              [round, r](StepOutput& out) {
                if (round->finished) return;
                if (r == 0) round->driver = std::move(out);
                if (--round->pending > 0) return;
                round->finished = true;
                round->done(std::move(*round->driver));
              },
              [round, r, timeout](caf::error& err) {
                if (round->finished) return;
                round->finished = true;
                const std::string who = "the worker of rank " + std::to_string(r);
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
  std::chrono::milliseconds timeout_;
};

void run_step(Self self) {
  auto& st = self->state;
  if (st.core->step(*st.executor) == engine::StepStatus::blocked)
    self->delayed_send(self, std::chrono::milliseconds(5), step_atom_v);  // nothing fits now; try again shortly
}

scheduler_actor::behavior_type scheduler_behavior(Self self, std::shared_ptr<SchedulerSetup> setup) {
  auto& st = self->state;
  engine_actor engine = setup->engine;
  st.workers = setup->workers;
  st.executor = std::make_unique<FanOutExecutor>(self, setup->workers, setup->step_timeout);
  st.core = std::make_unique<engine::EngineCore>(setup->core, setup->tokenizer, [self, engine](EngineCoreOutputs out) {
    self->send(engine, outputs_atom_v, std::move(out));
    self->send(self, step_atom_v);  // the next step, if there is work (a no-op otherwise)
  });
  for (auto& w : st.workers) self->monitor(w);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t r = 0; r < st.workers.size(); ++r)
      if (st.workers[r].address() == dm.source)
        st.core->fail_all(unavailable("the worker actor of rank " + std::to_string(r) +
                                      " died: " + self->system().render(dm.reason)));
  });
  return {
      [=](submit_atom, CoreRequest& request) -> caf::result<bool> {
        if (auto s = self->state.core->add_request(std::move(request)); !s) return to_error(s);
        self->send(self, step_atom_v);  // after the other submits already queued: they join this step
        return true;
      },
      [=](abort_atom, const std::string& id) { (void)self->state.core->abort_request(id); },
      [=](step_atom) { run_step(self); },
  };
}

}  // namespace

scheduler_actor spawn_scheduler_actor(caf::actor_system& system, SchedulerSetup setup) {
  return system.spawn(scheduler_behavior, std::make_shared<SchedulerSetup>(std::move(setup)));
}

}  // namespace troupe::actors
