#include "runtime/core/engine_core/engine_core.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "runtime/core/sched/forward_batch_builder.hpp"
#include "troupe/check.hpp"
#include "troupe/log.hpp"

namespace troupe::engine {
namespace {
double seconds_since(EngineCore::Clock::time_point t) {
  return std::chrono::duration<double>(EngineCore::Clock::now() - t).count();
}

/// The scheduler's state now, outside a step: the per-step counters stay zero
/// so that nothing is counted twice.
SchedulerStats between_steps(const sched::Scheduler& scheduler) {
  SchedulerStats s = scheduler.stats();
  s.prefix_cache_queries = s.prefix_cache_hits = 0;
  s.num_preempted_reqs = s.num_scheduled_tokens = 0;
  return s;
}
}  // namespace

struct EngineCore::LiveRequest {
  RequestTracker tracker;
  SamplingState sampling;
  bool started = false;
};

struct EngineCore::InFlight {
  sched::SchedulerOutput output;
  std::vector<std::string> sample_ids;
  std::vector<size_t> num_drafts;  // drafts verified per sample_ids entry
  Clock::time_point started;
};

namespace {
/// Appends a later delta of the same request (speculative decoding emits several tokens per step).
void append_delta(RequestOutput& into, RequestOutput&& more) {
  into.new_token_ids.insert(into.new_token_ids.end(), more.new_token_ids.begin(), more.new_token_ids.end());
  into.new_text += more.new_text;
  for (auto& lp : more.new_logprobs) into.new_logprobs.push_back(std::move(lp));
  into.finished = more.finished;
  into.finish_reason = more.finish_reason;
  into.stop_reason = std::move(more.stop_reason);
  into.error = std::move(more.error);
  into.num_generated_tokens = more.num_generated_tokens;
}
}  // namespace

EngineCore::EngineCore(EngineCoreConfig config, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                       OutputSink sink)
    : scheduler_(config.scheduler, config.kv, std::move(config.policy)),
      tokenizer_(std::move(tokenizer)),
      sink_(std::move(sink)),
      sleep_wait_limit_(config.sleep_wait_limit) {
  TROUPE_CHECK(tokenizer_ != nullptr, "EngineCore needs a tokenizer");
  TROUPE_CHECK(static_cast<bool>(sink_), "EngineCore needs an output sink");
}

EngineCore::~EngineCore() = default;

Status EngineCore::add_request(CoreRequest request, Clock::time_point arrival) {
  if (!health_.ok()) return unavailable("the engine is unhealthy: " + health_.message());
  sched::NewRequest nr;
  nr.id = request.request_id;
  nr.prompt_token_ids = request.prompt_token_ids;
  const bool pooling = request.pooling.has_value();
  nr.max_tokens = pooling ? 1 : request.sampling.max_tokens;  // a pooling request takes its prompt's one step
  nr.prompt_only = pooling;
  nr.priority = request.priority;
  nr.lora_id = request.lora_id;
  if (!request.cache_salt.empty()) nr.cache_salt = request.cache_salt;
  TROUPE_RETURN_IF_ERROR(scheduler_.add_request(std::move(nr)));
  if (request.sampling.min_tokens > 0) {
    // What min_tokens keeps out until it is reached: the stop tokens, and end-of-generation.
    auto& banned = request.sampling.min_tokens_banned_ids;
    banned = request.sampling.stop_token_ids;
    if (!request.sampling.ignore_eos)
      for (int32_t id : tokenizer_->eog_ids()) banned.push_back(id);
  }
  SamplingState sampling;
  sampling.request_id = request.request_id;
  sampling.params = request.sampling;
  sampling.pooling = pooling;
  if (pooling) sampling.pooling_params = *request.pooling;
  sampling.seed = request.seed;
  sampling.prompt_token_ids = request.prompt_token_ids;
  auto live = std::make_unique<LiveRequest>(LiveRequest{
      RequestTracker(request.request_id, std::move(request.prompt_token_ids), request.sampling, *tokenizer_, arrival),
      std::move(sampling), false});
  requests_[request.request_id] = std::move(live);
  if (sleep_level_ != 0) emit(EngineCoreOutputs{}, /*with_stats=*/true);  // no step will report it while asleep
  return {};
}

void EngineCore::end_request(LiveRequest& request, FinishReason reason, Status error, EngineCoreOutputs& out) {
  std::string id = request.tracker.id();
  (void)scheduler_.finish_request(id, reason);  // frees its blocks now (a no-op when the scheduler ended it)
  out.outputs.push_back(request.tracker.on_end(reason, std::move(error), Clock::now()));
  pending_finished_.push_back(request.tracker.finished_stats());
  requests_.erase(id);
}

bool EngineCore::abort_request(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  EngineCoreOutputs out;
  end_request(*it->second, FinishReason::abort, {}, out);
  // No step will report soon: publish the freed blocks now (else the step in flight will).
  emit(std::move(out), /*with_stats=*/!in_flight_);
  return true;
}

void EngineCore::emit(EngineCoreOutputs out, bool with_stats) {
  if (with_stats) {
    out.has_stats = true;
    out.stats.scheduler = between_steps(scheduler_);
    out.stats.scheduler.sleep_level = sleep_level_;
    out.stats.scheduler.structured_output_bytes = structured_output_bytes_;
    out.stats.iteration.finished_requests = std::move(pending_finished_);
    pending_finished_.clear();
  }
  out.health = health_;
  out.kv_events = scheduler_.kv_cache().take_kv_events();
  sink_(std::move(out));
}

void EngineCore::fail_lost(const Status& reason) {
  TROUPE_CHECK(!reason.ok(), "fail_lost needs an error");
  if (!health_.ok() && !health_is_loss_) {
    TROUPE_LOG_ERROR("engine is unhealthy: {} (first reported as: {})", reason.message(), health_.message());
    health_ = reason;
  }
  health_is_loss_ = true;
  fail_all(reason);  // sets health_ when it was still ok
}

void EngineCore::fail_all(const Status& error) {
  TROUPE_CHECK(!error.ok(), "fail_all needs an error");
  if (health_.ok()) {
    health_ = error;
    TROUPE_LOG_ERROR("engine is unhealthy: {}", error.message());
  }
  EngineCoreOutputs out;
  std::vector<LiveRequest*> live;
  for (auto& [id, r] : requests_) live.push_back(r.get());
  for (LiveRequest* r : live) end_request(*r, FinishReason::error, error, out);
  emit(std::move(out), /*with_stats=*/true);
}

void EngineCore::set_sleep_level(int level) {
  if (level != 0 && sleep_level_ == 0) {
    (void)scheduler_.kv_cache().reset_prefix_cache();
    asleep_since_ = Clock::now();
  }
  sleep_level_ = level;
  emit(EngineCoreOutputs{}, /*with_stats=*/true);
}

EngineCore::Clock::time_point EngineCore::wait_start(const LiveRequest& r) const {
  return std::max(r.tracker.arrival(), asleep_since_);
}

std::optional<EngineCore::Clock::duration> EngineCore::sleep_wait_left(Clock::time_point now) const {
  if (sleep_level_ == 0 || requests_.empty()) return std::nullopt;
  Clock::duration left = Clock::duration::max();
  for (const auto& [id, r] : requests_)
    left = std::min<Clock::duration>(left, wait_start(*r) + sleep_wait_limit_ - now);
  return std::max(left, Clock::duration::zero());
}

void EngineCore::expire_sleep_waits(Clock::time_point now) {
  std::vector<LiveRequest*> expired;
  for (auto& [id, r] : requests_)
    if (now - wait_start(*r) >= sleep_wait_limit_) expired.push_back(r.get());
  if (expired.empty()) return;
  const auto limit_s = std::chrono::duration<double>(sleep_wait_limit_).count();
  EngineCoreOutputs out;
  for (LiveRequest* r : expired)
    end_request(*r, FinishReason::error,
                unavailable(fmt::format("the engine is asleep (level {}) and the request waited {:g} s for it to "
                                        "wake (POST /wake_up, or raise --sleep-wait-timeout); try again once it "
                                        "is awake",
                                        sleep_level_, limit_s)),
                out);
  emit(std::move(out), /*with_stats=*/true);
}

StepStatus EngineCore::step(Executor& executor) {
  if (sleep_level_ != 0 && health_.ok() && !in_flight_) {
    expire_sleep_waits(Clock::now());
    return requests_.empty() ? StepStatus::idle : StepStatus::asleep;
  }
  if (in_flight_ || !health_.ok() || sleep_level_ != 0 || !scheduler_.has_unfinished_requests())
    return StepStatus::idle;
  auto step = std::make_shared<InFlight>();
  step->started = Clock::now();
  step->output = scheduler_.schedule();
  // A schedule that only preempted (the running requests gave their blocks back) has made
  // room: schedule again at once. Otherwise nothing fits until something changes (a request
  // arrives, ends or is aborted, an adapter or a wake-up), and each of those steps the core.
  for (int again = 0; step->output.empty() && !step->output.preempted_ids.empty() && again < 2; ++again) {
    unsent_finished_ids_.insert(unsent_finished_ids_.end(), step->output.finished_ids.begin(),
                                step->output.finished_ids.end());
    step->output = scheduler_.schedule();
  }
  // Nothing runs: the ranks hear of the requests that finished with the next step that does.
  unsent_finished_ids_.insert(unsent_finished_ids_.end(), step->output.finished_ids.begin(),
                              step->output.finished_ids.end());
  if (step->output.empty()) return StepStatus::blocked;

  StepInput in;
  in.step = step->output.step;
  in.batch = sched::make_forward_batch(step->output);
  bool any_drafts = false;
  for (const auto& sr : step->output.scheduled) {
    auto it = requests_.find(sr.request_id);
    TROUPE_CHECK(it != requests_.end(), "the scheduler scheduled a request the core does not know");
    if (sr.is_new) {
      SamplingState s = it->second->sampling;
      if (const auto* r = scheduler_.find_request(sr.request_id)) s.output_token_ids = r->output_token_ids();
      in.new_requests.push_back(std::move(s));
    }
    if (sr.needs_logits) {
      in.sample_ids.push_back(sr.request_id);
      in.draft_token_ids.push_back(sr.draft_token_ids);
      step->num_drafts.push_back(sr.draft_token_ids.size());
      any_drafts = any_drafts || !sr.draft_token_ids.empty();
    }
  }
  if (!any_drafts) in.draft_token_ids.clear();  // the common case travels without them
  in.finished_ids = std::move(unsent_finished_ids_);
  unsent_finished_ids_.clear();
  step->sample_ids = in.sample_ids;
  in_flight_ = true;
  executor.execute(std::move(in), [this, step](Result<StepOutput> result) { complete_step(*step, std::move(result)); });
  return StepStatus::started;
}

void EngineCore::complete_step(const InFlight& step, Result<StepOutput> result) {
  TROUPE_CHECK(in_flight_, "a step completed twice");
  in_flight_ = false;
  const auto& scheduled = step.output;
  Status failure;
  if (!result) {
    failure = Status(result.status().code(), fmt::format("step {} failed: {}", scheduled.step, result.status().message()));
  } else if (!result->num_accepted.empty() && result->num_accepted.size() != step.sample_ids.size()) {
    failure = internal_error(fmt::format("step {}: the driver rank returned {} acceptance counts for {} rows",
                                         scheduled.step, result->num_accepted.size(), step.sample_ids.size()));
  } else if (!result->draft_token_ids.empty() && result->draft_token_ids.size() != step.sample_ids.size()) {
    failure = internal_error(fmt::format("step {}: the driver rank returned {} draft lists for {} rows",
                                         scheduled.step, result->draft_token_ids.size(), step.sample_ids.size()));
  } else {
    size_t expected = step.sample_ids.size();
    for (size_t i = 0; i < result->num_accepted.size(); ++i) {
      if (result->num_accepted[i] < 0 || static_cast<size_t>(result->num_accepted[i]) > step.num_drafts[i]) {
        failure = internal_error(fmt::format("step {}: the driver rank accepted {} of {} drafts", scheduled.step,
                                             result->num_accepted[i], step.num_drafts[i]));
        break;
      }
      expected += static_cast<size_t>(result->num_accepted[i]);
    }
    if (failure.ok() && result->tokens.size() != expected)
      failure = internal_error(fmt::format("step {}: the driver rank returned {} tokens for {} rows", scheduled.step,
                                           result->tokens.size(), expected));
  }
  if (!failure.ok()) {
    fail_all(failure);
    (void)scheduler_.update_from_output(scheduled, {});  // closes the step
    return;
  }
  // Requests the driver rank could not go on with (their structured output's grammar) end
  // alone, with their errors; their tokens of this step are dropped.
  EngineCoreOutputs out;
  for (RequestFailure& f : result->failed) {
    auto it = requests_.find(f.request_id);
    if (it != requests_.end()) end_request(*it->second, FinishReason::error, std::move(f.error), out);
  }
  // Each entry's tokens: [first_of[i], first_of[i] + count) of result->tokens.
  std::unordered_map<std::string, sched::StepTokens> sampled;
  std::unordered_map<std::string, size_t> first_of;
  SpecDecodingStats spec;
  size_t at = 0;
  for (size_t i = 0; i < step.sample_ids.size(); ++i) {
    const size_t accepted = result->num_accepted.empty() ? 0 : static_cast<size_t>(result->num_accepted[i]);
    const size_t count = 1 + accepted;
    if (step.num_drafts[i] > 0) {
      ++spec.num_drafts;
      spec.num_draft_tokens += static_cast<int64_t>(step.num_drafts[i]);
      spec.num_accepted_tokens += static_cast<int64_t>(accepted);
      if (spec.num_accepted_tokens_per_pos.size() < step.num_drafts[i])
        spec.num_accepted_tokens_per_pos.resize(step.num_drafts[i], 0);
      for (size_t p = 0; p < accepted; ++p) ++spec.num_accepted_tokens_per_pos[p];
    }
    const size_t first = at;
    at += count;
    if (!requests_.contains(step.sample_ids[i])) continue;  // aborted while the step ran
    auto& tokens = sampled[step.sample_ids[i]];
    for (size_t j = first; j < first + count; ++j) tokens.token_ids.push_back(result->tokens[j].token);
    if (!result->draft_token_ids.empty()) tokens.draft_token_ids = std::move(result->draft_token_ids[i]);
    first_of[step.sample_ids[i]] = first;
  }
  auto updates = scheduler_.update_from_tokens(scheduled, sampled);
  if (!updates) {
    fail_all(internal_error("scheduler update failed: " + updates.status().message()));
    (void)scheduler_.update_from_output(scheduled, {});
    return;
  }

  const auto now = Clock::now();
  for (const auto& sr : scheduled.scheduled) {
    auto it = requests_.find(sr.request_id);
    if (it != requests_.end() && !it->second->started) {
      it->second->started = true;
      it->second->tracker.on_scheduled(step.started);
    }
  }
  auto& iter = out.stats.iteration;
  int64_t decode_tokens = 0;
  for (auto& u : *updates) {
    auto it = requests_.find(u.request_id);
    if (it == requests_.end() || u.new_token_ids.empty()) continue;
    auto& tracker = it->second->tracker;
    const size_t first = first_of.at(u.request_id);
    if (it->second->sampling.pooling) {
      SampledToken& tok = result->tokens[first];
      if (tok.embedding.empty()) {
        failure = internal_error(fmt::format("step {}: no pooled output for pooling request '{}'", scheduled.step,
                                             u.request_id));
        break;
      }
      out.outputs.push_back(tracker.on_pooled(std::move(tok.embedding), now));
      if (!u.finished) (void)scheduler_.finish_request(u.request_id, FinishReason::stop);
      pending_finished_.push_back(tracker.finished_stats());
      requests_.erase(it);
      continue;
    }
    // One token at a time through the stop check: a stop token, EOG or stop string ends the
    // request there, and the tokens after it (accepted drafts) are dropped.
    std::optional<RequestOutput> delta;
    for (size_t j = 0; j < u.new_token_ids.size(); ++j) {
      SampledToken& tok = result->tokens[first + j];
      const bool last = j + 1 == u.new_token_ids.size();
      TokenLogprob lp{tok.token, tok.logprob, tok.top_ids, tok.top_logprobs};
      RequestOutput d =
          tracker.on_token(tok.token, tracker.wants_logprobs() ? &lp : nullptr, u.finished && last, now);
      ++iter.num_generation_tokens;
      if (tracker.last_was_first_token()) {
        iter.time_to_first_tokens_s.push_back(tracker.last_latency_s());
      } else {
        iter.inter_token_latencies_s.push_back(tracker.last_latency_s());
      }
      if (delta) {
        append_delta(*delta, std::move(d));
      } else {
        delta = std::move(d);
      }
      if (delta->finished) break;
    }
    if (!tracker.last_was_first_token() || u.new_token_ids.size() > 1) ++decode_tokens;
    if (delta->finished) {
      // A stop token, EOG or stop string ended it; the scheduler may still think it runs.
      if (!u.finished) (void)scheduler_.finish_request(u.request_id, delta->finish_reason);
      pending_finished_.push_back(tracker.finished_stats());
      requests_.erase(it);
    }
    out.outputs.push_back(std::move(*delta));
  }
  if (!failure.ok()) {
    if (!out.outputs.empty()) sink_(std::move(out));  // what ended before the failure still reaches its callers
    return fail_all(failure);
  }
  out.has_stats = true;
  out.stats.scheduler = scheduler_.stats();
  out.stats.scheduler.step_seconds = seconds_since(step.started);
  out.stats.scheduler.model_seconds = result->model_seconds;
  out.stats.scheduler.communicator_bytes = result->communicator_bytes;
  out.stats.scheduler.communicator_seconds = result->communicator_seconds;
  out.stats.scheduler.sleep_level = sleep_level_;
  out.stats.scheduler.spec_decoding = std::move(spec);
  structured_output_bytes_ = result->structured_output_bytes;
  out.stats.scheduler.structured_output_bytes = structured_output_bytes_;
  // Scheduled tokens that were neither a decode's last token nor a draft were prompt tokens.
  iter.num_prompt_tokens =
      std::max<int64_t>(0, scheduled.num_scheduled_tokens - decode_tokens - out.stats.scheduler.spec_decoding.num_draft_tokens);
  iter.finished_requests = std::move(pending_finished_);
  pending_finished_.clear();
  out.num_scheduled_requests = static_cast<int64_t>(scheduled.scheduled.size());
  out.health = health_;
  out.kv_events = scheduler_.kv_cache().take_kv_events();
  sink_(std::move(out));
}

}  // namespace troupe::engine
