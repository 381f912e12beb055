#include "actors/engine_actor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <unordered_map>

#include "actors/error_text.hpp"
#include "actors/messages.hpp"
#include "runtime/engine/request_tracker.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSchedulerTimeout = std::chrono::seconds(30);

struct Tracked {
  engine::RequestTracker tracker;
  OutputCallback on_output;
};

struct EngineActorState {
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  caf::actor scheduler;
  caf::actor stat_logger;
  std::shared_ptr<EngineCounters> counters;
  std::unordered_map<std::string, std::unique_ptr<Tracked>> requests;
  std::vector<FinishedRequestStats> pending_finished;  // aborted since the last report
  static inline const char* name = "troupe.engine";
};

using Self = caf::stateful_actor<EngineActorState>;

void deliver(Self* self, Tracked& t, engine::RequestOutput out) {
  try {
    t.on_output(std::move(out));
  } catch (const std::exception& e) {  // a caller's callback must not take the engine down
    TROUPE_LOG_ERROR("output callback of request {} threw: {}", t.tracker.id(), e.what());
  }
  (void)self;
}

void end_request(Self* self, const std::string& id) {
  if (self->state.requests.erase(id) > 0) self->state.counters->in_flight--;
}

void on_report(Self* self, StepReport& report) {
  auto& st = self->state;
  auto now = Clock::now();
  for (const auto& id : report.started_ids) {
    auto it = st.requests.find(id);
    if (it != st.requests.end()) it->second->tracker.on_scheduled(now);
  }
  StatsEvent ev;
  ev.scheduler = report.stats;
  ev.iteration.finished_requests = std::move(st.pending_finished);
  st.pending_finished.clear();
  int64_t decode_tokens = 0;
  int64_t finished_now = 0;
  std::vector<std::pair<Tracked*, engine::RequestOutput>> ready;  // delivered after the stats are out
  for (auto& d : report.deltas) {
    auto it = st.requests.find(d.request_id);
    if (it == st.requests.end()) continue;  // aborted or stopped meanwhile
    auto& t = *it->second;
    engine::RequestOutput out;
    if (d.token.token < 0) {
      out = t.tracker.on_end(d.finish_reason.empty() ? "error" : d.finish_reason, d.error, now);
    } else {
      engine::TokenLogprob lp{d.token.token, d.token.logprob, d.token.top_ids, d.token.top_logprobs};
      bool want_logprobs = t.tracker.wants_logprobs();
      out = t.tracker.on_token(d.token.token, want_logprobs ? &lp : nullptr, d.finished, d.finish_reason,
                               d.stop_reason, now);
      ev.iteration.num_generation_tokens++;
      if (t.tracker.last_was_first_token()) {
        ev.iteration.time_to_first_tokens_s.push_back(t.tracker.last_latency_s());
      } else {
        ++decode_tokens;
        ev.iteration.inter_token_latencies_s.push_back(t.tracker.last_latency_s());
      }
      // A stop string ended it here; the scheduler still thinks it runs.
      if (t.tracker.stop_string_hit() && !d.finished)
        self->send(st.scheduler, abort_atom_v, d.request_id, std::string("stop"));
    }
    if (out.finished) {
      ev.iteration.finished_requests.push_back(t.tracker.finished_stats());
      ++finished_now;
    }
    ready.emplace_back(&t, std::move(out));
  }
  ev.iteration.num_prompt_tokens = std::max<int64_t>(0, report.stats.num_scheduled_tokens - decode_tokens);
  int64_t ran = report.stats.num_running_reqs + finished_now;
  auto& max_running = st.counters->max_running;
  for (int64_t cur = max_running.load(); ran > cur && !max_running.compare_exchange_weak(cur, ran);) {
  }
  // Stats first, outputs second: a caller that saw its request finish also
  // finds that step in the stats (subscribers are never behind the outputs).
  self->send(st.stat_logger, stats_atom_v, std::move(ev));
  for (auto& [t, out] : ready) {
    bool finished = out.finished;
    std::string id = out.request_id;
    deliver(self, *t, std::move(out));
    if (finished) end_request(self, id);
  }
}

caf::behavior engine_behavior(Self* self, std::shared_ptr<EngineActorSetup> setup) {
  auto& st = self->state;
  st.tokenizer = setup->tokenizer;
  st.stat_logger = setup->stat_logger;
  st.counters = setup->counters;
  return {
      [=](scheduler_atom, const caf::actor& scheduler) { self->state.scheduler = scheduler; },
      [=](submit_atom, SubmitRequest& req) {
        auto& st = self->state;
        auto tracked = std::make_unique<Tracked>(Tracked{
            engine::RequestTracker(req.request_id, req.prompt_token_ids, req.sampling, *st.tokenizer, Clock::now()),
            std::move(req.on_output)});
        std::string id = req.request_id;
        st.requests[id] = std::move(tracked);
        SamplingState s{id, req.sampling, req.seed, std::move(req.prompt_token_ids), {}};
        self->request(st.scheduler, kSchedulerTimeout, submit_atom_v, std::move(s), req.cache_salt)
            .then([](bool) {},
                  [=](caf::error& err) {
                    auto it = self->state.requests.find(id);
                    if (it == self->state.requests.end()) return;
                    auto out = it->second->tracker.on_end("error", error_text(self->system(), err), Clock::now());
                    deliver(self, *it->second, std::move(out));
                    end_request(self, id);
                  });
      },
      [=](abort_atom, const std::string& id) {
        auto it = self->state.requests.find(id);
        if (it == self->state.requests.end()) return;
        self->send(self->state.scheduler, abort_atom_v, id, std::string("abort"));
        auto out = it->second->tracker.on_end("abort", "", Clock::now());
        // Reported with the scheduler's next stats, which show the freed blocks.
        self->state.pending_finished.push_back(it->second->tracker.finished_stats());
        deliver(self, *it->second, std::move(out));
        end_request(self, id);
      },
      [=](report_atom, StepReport& report) { on_report(self, report); },
      [=](health_atom, bool healthy, const std::string& reason) {
        auto& c = *self->state.counters;
        std::lock_guard lock(c.mu);
        c.healthy = healthy;
        c.unhealthy_reason = reason;
        if (!healthy) TROUPE_LOG_ERROR("engine is unhealthy: {}", reason);
      },
  };
}

}  // namespace

caf::actor spawn_engine_actor(caf::actor_system& system, EngineActorSetup setup) {
  return system.spawn(engine_behavior, std::make_shared<EngineActorSetup>(std::move(setup)));
}

void set_scheduler(caf::actor_system& system, const caf::actor& engine, const caf::actor& scheduler) {
  caf::anon_send(engine, scheduler_atom_v, scheduler);
  (void)system;
}

}  // namespace troupe::actors
