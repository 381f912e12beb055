#include "actors/scheduler_actor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "actors/error_text.hpp"
#include "actors/messages.hpp"
#include "runtime/sched/forward_batch_builder.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;
// A step on a 2-core CPU can take seconds for a long prefill; a worker that does
// not answer within this is treated as dead.
constexpr auto kStepTimeout = std::chrono::seconds(600);

struct RequestMeta {
  SamplingState sampling;
  bool started = false;
};

struct SchedulerState {
  std::unique_ptr<sched::Scheduler> scheduler;
  std::vector<caf::actor> workers;
  caf::actor engine;
  std::unordered_set<int32_t> eog;
  std::unordered_map<std::string, RequestMeta> meta;
  std::vector<std::string> finished_for_workers;
  bool in_flight = false;
  bool healthy = true;
  std::string unhealthy_reason;
  static inline const char* name = "troupe.scheduler";
};

using Self = caf::stateful_actor<SchedulerState>;

void run_step(Self* self);

void fail_all(Self* self, const std::string& reason) {
  auto& st = self->state;
  st.healthy = false;
  st.unhealthy_reason = reason;
  StepReport report;
  for (auto& [id, m] : st.meta) {
    RequestDelta d;
    d.request_id = id;
    d.finished = true;
    d.finish_reason = "error";
    d.error = reason;
    report.deltas.push_back(std::move(d));
    (void)st.scheduler->finish_request(id, sched::FinishReason::error);
  }
  st.meta.clear();
  report.stats = st.scheduler->stats();
  self->send(st.engine, report_atom_v, std::move(report));
  self->send(st.engine, health_atom_v, false, reason);
}

void finish_step(Self* self, const sched::SchedulerOutput& out, const std::vector<std::string>& sample_ids,
                 StepOutput& result, Clock::time_point t0) {
  auto& st = self->state;
  std::unordered_map<std::string, int32_t> sampled;
  std::unordered_map<std::string, size_t> row_of;
  for (size_t i = 0; i < sample_ids.size() && i < result.tokens.size(); ++i) {
    if (st.meta.count(sample_ids[i]) == 0) continue;  // aborted while the step ran
    sampled[sample_ids[i]] = result.tokens[i].token;
    row_of[sample_ids[i]] = i;
  }
  auto updates = st.scheduler->update_from_output(out, sampled);
  if (!updates) {
    fail_all(self, "scheduler update failed: " + updates.status().message());
    return;
  }
  StepReport report;
  for (const auto& sr : out.scheduled) {
    auto it = st.meta.find(sr.request_id);
    if (it != st.meta.end() && !it->second.started) {
      it->second.started = true;
      report.started_ids.push_back(sr.request_id);
    }
  }
  for (auto& u : *updates) {
    auto it = st.meta.find(u.request_id);
    if (it == st.meta.end() || u.new_token_ids.empty()) continue;
    const auto& params = it->second.sampling.params;
    RequestDelta d;
    d.request_id = u.request_id;
    d.token = result.tokens[row_of[u.request_id]];
    int32_t tok = u.new_token_ids.back();
    bool is_stop_id = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), tok) !=
                      params.stop_token_ids.end();
    bool is_eog = !params.ignore_eos && st.eog.count(tok) > 0;
    if (is_stop_id || is_eog) {
      if (!u.finished) (void)st.scheduler->finish_request(u.request_id, sched::FinishReason::stop);
      d.finished = true;
      d.finish_reason = "stop";
      if (is_stop_id) d.stop_reason = std::to_string(tok);
    } else if (u.finished) {
      d.finished = true;
      d.finish_reason = sched::to_string(u.finish_reason);
    }
    if (d.finished) {
      st.finished_for_workers.push_back(u.request_id);
      st.meta.erase(it);
    }
    report.deltas.push_back(std::move(d));
  }
  report.stats = st.scheduler->stats();
  report.stats.step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  report.stats.model_seconds = result.model_seconds;
  self->send(st.engine, report_atom_v, std::move(report));
}

void run_step(Self* self) {
  auto& st = self->state;
  if (st.in_flight || !st.healthy || !st.scheduler->has_unfinished_requests()) return;
  auto t0 = Clock::now();
  auto out = std::make_shared<sched::SchedulerOutput>(st.scheduler->schedule());
  if (out->empty()) {
    // Nothing fits right now (e.g. every block is held); try again shortly.
    self->delayed_send(self, std::chrono::milliseconds(5), step_atom_v);
    return;
  }
  StepInput in;
  in.step = out->step;
  in.batch = sched::make_forward_batch(*out);
  for (const auto& sr : out->scheduled) {
    auto it = st.meta.find(sr.request_id);
    if (it == st.meta.end()) continue;
    if (sr.is_new) {
      SamplingState s = it->second.sampling;
      if (const auto* r = st.scheduler->find_request(sr.request_id)) s.output_token_ids = r->output_token_ids();
      in.new_requests.push_back(std::move(s));
    }
    if (sr.needs_logits) in.sample_ids.push_back(sr.request_id);
  }
  in.finished_ids = std::move(st.finished_for_workers);
  st.finished_for_workers.clear();
  for (const auto& id : out->finished_ids) in.finished_ids.push_back(id);
  auto sample_ids = in.sample_ids;
  st.in_flight = true;
  // Ranks > 0 run the same step; only rank 0's sampled tokens are used.
  for (size_t r = 1; r < st.workers.size(); ++r) self->send(st.workers[r], execute_atom_v, in);
  self->request(st.workers[0], kStepTimeout, execute_atom_v, std::move(in))
      .then(
          [=](StepOutput& result) {
            self->state.in_flight = false;
            finish_step(self, *out, sample_ids, result, t0);
            self->send(self, step_atom_v);
          },
          [=](caf::error& err) {
            self->state.in_flight = false;
            fail_all(self, "worker step failed: " + error_text(self->system(), err));
          });
}

caf::behavior scheduler_behavior(Self* self, std::shared_ptr<SchedulerSetup> setup) {
  auto& st = self->state;
  st.scheduler = std::make_unique<sched::Scheduler>(setup->config, setup->kv_config);
  st.workers = setup->workers;
  st.engine = setup->engine;
  st.eog.insert(setup->eog_ids.begin(), setup->eog_ids.end());
  for (auto& w : st.workers) self->monitor(w);
  self->set_down_handler([=](caf::down_msg& dm) {
    if (!self->state.healthy) return;
    fail_all(self, "a worker actor died: " + self->system().render(dm.reason));
  });
  return {
      [=](submit_atom, SamplingState& s, std::string& cache_salt) -> caf::result<bool> {
        auto& st = self->state;
        if (!st.healthy) return caf::make_error(caf::sec::runtime_error, "engine is unhealthy: " + st.unhealthy_reason);
        sched::NewRequest nr;
        nr.id = s.request_id;
        nr.prompt_token_ids = s.prompt_token_ids;
        nr.max_tokens = s.params.max_tokens;
        if (!cache_salt.empty()) nr.cache_salt = cache_salt;
        if (auto status = st.scheduler->add_request(std::move(nr)); !status)
          return caf::make_error(caf::sec::runtime_error, status.message());
        std::string id = s.request_id;
        st.meta[id] = RequestMeta{std::move(s), false};
        if (!st.in_flight) self->send(self, step_atom_v);
        return true;
      },
      [=](abort_atom, const std::string& id, const std::string& reason) {
        auto& st = self->state;
        if (st.meta.erase(id) == 0) return;
        auto why = reason == "stop" ? sched::FinishReason::stop : sched::FinishReason::abort;
        (void)st.scheduler->finish_request(id, why);  // frees its blocks now
        st.finished_for_workers.push_back(id);
        if (!st.in_flight) {
          // No step will report soon: publish the freed blocks now. Per-step
          // counters stay zero so nothing is counted twice.
          StepReport report;
          report.stats = st.scheduler->stats();
          report.stats.prefix_cache_queries = report.stats.prefix_cache_hits = 0;
          report.stats.num_preempted_reqs = report.stats.num_scheduled_tokens = 0;
          self->send(st.engine, report_atom_v, std::move(report));
        }
      },
      [=](step_atom) { run_step(self); },
  };
}

}  // namespace

caf::actor spawn_scheduler_actor(caf::actor_system& system, SchedulerSetup setup) {
  return system.spawn(scheduler_behavior, std::make_shared<SchedulerSetup>(std::move(setup)));
}

}  // namespace troupe::actors
