#include "runtime/core/sched/scheduler.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "troupe/check.hpp"
#include "troupe/log.hpp"

namespace troupe::sched {

namespace {
std::shared_ptr<const SchedulerPolicy> fcfs_policy() {
  auto policy = scheduler_policy_registry::create(kFcfsSchedulerPolicy, ConfigValues{});
  TROUPE_CHECK(policy.ok(), "the built-in FCFS scheduler policy is missing");
  return std::shared_ptr<const SchedulerPolicy>(std::move(policy).value());
}

SchedulingRequest view(const Request& r) {
  SchedulingRequest v;
  v.request_id = r.id();
  v.priority = r.priority();
  v.arrival_order = r.arrival_order();
  v.num_prompt_tokens = r.num_prompt_tokens();
  v.num_output_tokens = r.num_output_tokens();
  return v;
}
}  // namespace

Scheduler::Scheduler(SchedulerConfig config, KvCacheConfig kv_config, std::shared_ptr<const SchedulerPolicy> policy)
    : config_(config),
      policy_(policy ? std::move(policy) : fcfs_policy()),
      kv_(kv_config),
      max_model_len_(config.max_model_len > 0 ? config.max_model_len : kv_.capacity_tokens()) {
  TROUPE_CHECK(config.max_num_batched_tokens > 0, "max_num_batched_tokens must be positive");
  TROUPE_CHECK(config.max_num_seqs > 0, "max_num_seqs must be positive");
}

Status Scheduler::add_request(NewRequest request) {
  if (request.id.empty()) return invalid_argument("request id is empty");
  if (requests_.contains(request.id))
    return invalid_argument(fmt::format("request id '{}' is already in use", request.id));
  if (request.prompt_token_ids.empty())
    return invalid_argument(fmt::format("request '{}' has an empty prompt", request.id));
  if (request.max_tokens < 1)
    return invalid_argument(fmt::format("request '{}': max_tokens must be at least 1, got {}", request.id,
                                        request.max_tokens));
  if (request.priority != 0 && !policy_->uses_priority())
    return invalid_argument(fmt::format(
        "request '{}' has priority {}, but the scheduler policy does not use priorities (start the engine with a "
        "priority policy: --scheduler-cls NAME)",
        request.id, request.priority));
  if (request.lora_id != 0 && !loras_.contains(request.lora_id))
    return not_found(fmt::format("request '{}' names LoRA adapter {}, which is not loaded", request.id,
                                 request.lora_id));
  for (int32_t t : request.prompt_token_ids)
    if (t < 0) return invalid_argument(fmt::format("request '{}' has a negative token id {}", request.id, t));
  const auto prompt_len = static_cast<int64_t>(request.prompt_token_ids.size());
  const int64_t total = prompt_len + (request.prompt_only ? 0 : request.max_tokens);
  // A request that cannot fit even alone would preempt itself forever.
  if (total > kv_.capacity_tokens())
    return out_of_range(fmt::format(
        "request '{}': prompt ({} tokens) + max_tokens ({}) = {} tokens exceeds the KV cache capacity of {} "
        "tokens ({} blocks of {})",
        request.id, prompt_len, request.max_tokens, total, kv_.capacity_tokens(), kv_.num_blocks(),
        kv_.block_size()));
  if (total > max_model_len_)
    return out_of_range(fmt::format(
        "request '{}': prompt ({} tokens) + max_tokens ({}) = {} tokens exceeds the maximum model length {}",
        request.id, prompt_len, request.max_tokens, total, max_model_len_));
  if (!config_.enable_chunked_prefill && prompt_len > config_.max_num_batched_tokens)
    return out_of_range(fmt::format(
        "request '{}': prompt of {} tokens exceeds max_num_batched_tokens {} and chunked prefill is off",
        request.id, prompt_len, config_.max_num_batched_tokens));

  std::string id = request.id;
  auto owned = std::make_unique<Request>(std::move(request), next_arrival_++);
  Request* r = owned.get();
  requests_.emplace(std::move(id), std::move(owned));
  enqueue_waiting(r);
  return Status::ok_status();
}

Status Scheduler::add_lora(int64_t lora_id) {
  if (config_.max_loras <= 0) return invalid_argument("LoRA is off (start the engine with --enable-lora)");
  if (lora_id <= 0) return invalid_argument(fmt::format("a LoRA adapter id must be positive, got {}", lora_id));
  if (!loras_.insert(lora_id).second) return invalid_argument(fmt::format("LoRA adapter {} is already loaded", lora_id));
  return Status::ok_status();
}

Status Scheduler::remove_lora(int64_t lora_id) {
  if (!loras_.contains(lora_id)) return not_found(fmt::format("LoRA adapter {} is not loaded", lora_id));
  if (const int32_t n = num_requests_with_lora(lora_id); n > 0)
    return unavailable(fmt::format("LoRA adapter {} is in use by {} unfinished request(s)", lora_id, n));
  loras_.erase(lora_id);
  return Status::ok_status();
}

int32_t Scheduler::num_requests_with_lora(int64_t lora_id) const {
  int32_t n = 0;
  for (const auto& [id, r] : requests_) n += r->lora_id() == lora_id ? 1 : 0;
  return n;
}

const Request* Scheduler::find_request(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

bool Scheduler::before(const Request& a, const Request& b) const { return policy_->before(view(a), view(b)); }

void Scheduler::enqueue_waiting(Request* request) {
  // Under FCFS a new request has the latest arrival (the back) and a preempted
  // one an earlier arrival than every waiting request (the front).
  auto at = std::upper_bound(waiting_.begin(), waiting_.end(), request,
                             [this](const Request* a, const Request* b) { return before(*a, *b); });
  waiting_.insert(at, request);
}

Request* Scheduler::pick_victim() const {
  TROUPE_CHECK(!running_.empty(), "no running request to preempt");
  Request* victim = running_.back();
  for (auto it = running_.rbegin() + 1; it != running_.rend(); ++it)
    if (before(*victim, **it)) victim = *it;
  return victim;
}

void Scheduler::preempt(Request* request) {
  // Recompute: drop its KV; its freed blocks stay cached, so resuming often
  // hits them again.
  kv_.free(request->id());
  request->set_num_computed_tokens(0);
  request->set_spec_token_ids({});
  request->set_status(RequestStatus::preempted);
  enqueue_waiting(request);
}

void Scheduler::remove(Request* request, RequestStatus status) {
  const std::string id = request->id();
  kv_.free(id);
  if (auto it = std::find(running_.begin(), running_.end(), request); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), request); it != waiting_.end()) waiting_.erase(it);
  request->set_status(status);
  finished_since_schedule_.push_back(id);
  requests_.erase(id);  // destroys *request
}

ScheduledRequest Scheduler::make_scheduled(const Request& request, int64_t num_new_tokens, bool is_new) const {
  ScheduledRequest s;
  s.request_id = request.id();
  s.num_computed_tokens = request.num_computed_tokens();
  const auto& all = request.all_token_ids();
  const int64_t end = s.num_computed_tokens + num_new_tokens;
  const int64_t known_end = std::min(end, request.num_tokens());
  s.token_ids.assign(all.begin() + s.num_computed_tokens, all.begin() + known_end);
  // Past the known tokens: the drafts (speculative decoding), as many as fit.
  const auto& spec = request.spec_token_ids();
  TROUPE_CHECK(end - known_end <= static_cast<int64_t>(spec.size()), "scheduled past the drafts");
  s.draft_token_ids.assign(spec.begin(), spec.begin() + (end - known_end));
  s.token_ids.insert(s.token_ids.end(), s.draft_token_ids.begin(), s.draft_token_ids.end());
  s.block_table = kv_.block_table(request.id());
  s.needs_logits = end >= request.num_tokens();
  s.is_new = is_new;
  s.lora_id = request.lora_id();
  return s;
}

SchedulerOutput Scheduler::schedule() {
  TROUPE_CHECK(!awaiting_update_, "schedule() called before update_from_output() of the previous step");
  SchedulerOutput out;
  out.step = ++step_;
  out.block_size = kv_.block_size();
  out.finished_ids = std::move(finished_since_schedule_);
  finished_since_schedule_.clear();

  struct Pick {
    Request* request;
    int64_t num_new_tokens;
    bool is_new;
  };
  std::vector<Pick> picks;
  int64_t budget = config_.max_num_batched_tokens;

  // 1. Running requests in admission order: a decode takes 1 token (plus its
  // drafts, with speculative decoding), an unfinished prefill the rest of its
  // prompt (as far as the budget goes).
  size_t index = 0;
  while (index < running_.size() && budget > 0) {
    Request* request = running_[index];
    const auto num_spec = static_cast<int64_t>(request->spec_token_ids().size());
    const int64_t n = std::min(request->num_tokens() + num_spec - request->num_computed_tokens(), budget);
    if (n <= 0) {
      ++index;
      continue;
    }
    bool scheduled = false;
    for (;;) {
      if (kv_.allocate_slots(*request, n)) {
        scheduled = true;
        break;
      }
      // No room: preempt the request last in the policy's order (maybe this
      // one; under FCFS the most recently admitted).
      Request* victim = pick_victim();
      const auto at = std::find(running_.begin(), running_.end(), victim);
      const auto position = static_cast<size_t>(at - running_.begin());
      running_.erase(at);
      if (position < index) {
        // Scheduled earlier in this step (never under FCFS): take its share back.
        --index;
        auto pick = std::find_if(picks.begin(), picks.end(), [victim](const Pick& p) { return p.request == victim; });
        if (pick != picks.end()) {
          budget += pick->num_new_tokens;
          picks.erase(pick);
        }
      }
      preempt(victim);
      out.preempted_ids.push_back(victim->id());
      if (victim == request) break;
    }
    if (!scheduled) break;
    picks.push_back({request, n, false});
    budget -= n;
    ++index;
  }
  // Distinct adapters of the running requests (at most max_loras, so every step's are too):
  // a waiting request whose adapter would exceed the limit waits, later ones may go first.
  std::set<int64_t> step_loras;
  for (const Request* r : running_)
    if (r->lora_id() != 0) step_loras.insert(r->lora_id());

  // 2. Waiting requests in the policy's order, unless this step had to preempt (then
  // memory is short and admitting more would only thrash).
  if (out.preempted_ids.empty()) {
    size_t at = 0;  // waiting requests before `at` wait for another step's adapters
    while (at < waiting_.size() && budget > 0 && static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
      Request* request = waiting_[at];
      const int64_t lora = request->lora_id();
      if (lora != 0 && !step_loras.contains(lora) &&
          static_cast<int32_t>(step_loras.size()) >= config_.max_loras) {
        ++at;
        continue;
      }
      TROUPE_CHECK(request->num_computed_tokens() == 0, "a waiting request holds computed tokens");
      const ComputedBlocks hit = kv_.get_computed_blocks(*request);
      int64_t n = request->num_tokens() - hit.num_tokens;
      if (!config_.enable_chunked_prefill && n > budget) break;
      n = std::min(n, budget);
      TROUPE_CHECK(n > 0, "a cache hit never covers the last token");
      if (!kv_.allocate_slots(*request, n, hit.num_tokens, hit.blocks)) break;
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(at));
      if (lora != 0) step_loras.insert(lora);
      running_.push_back(request);
      request->set_status(RequestStatus::running);
      request->set_num_computed_tokens(hit.num_tokens);
      picks.push_back({request, n, true});
      budget -= n;
    }
  }

  for (const Pick& p : picks) {
    out.scheduled.push_back(make_scheduled(*p.request, p.num_new_tokens, p.is_new));
    out.num_scheduled_tokens += p.num_new_tokens;
  }
  awaiting_update_ = !out.scheduled.empty();

  const PrefixCacheStats prefix = kv_.take_prefix_cache_stats();
  last_step_ = SchedulerStats{};
  last_step_.step = out.step;
  last_step_.prefix_cache_queries = prefix.queries;
  last_step_.prefix_cache_hits = prefix.hits;
  last_step_.num_preempted_reqs = static_cast<int64_t>(out.preempted_ids.size());
  last_step_.num_scheduled_tokens = out.num_scheduled_tokens;
  if (!out.preempted_ids.empty())
    TROUPE_LOG_DEBUG("step {}: preempted {} request(s), KV usage {:.2f}", out.step, out.preempted_ids.size(),
                     kv_.usage());
  return out;
}

Result<std::vector<RequestUpdate>> Scheduler::update_from_output(
    const SchedulerOutput& output, const std::unordered_map<std::string, int32_t>& sampled) {
  std::unordered_map<std::string, StepTokens> tokens;
  tokens.reserve(sampled.size());
  for (const auto& [id, token] : sampled) tokens[id].token_ids.push_back(token);
  return update_from_tokens(output, tokens);
}

Result<std::vector<RequestUpdate>> Scheduler::update_from_tokens(
    const SchedulerOutput& output, const std::unordered_map<std::string, StepTokens>& tokens) {
  if (!awaiting_update_ || output.step != step_)
    return invalid_argument(fmt::format("update_from_output: output of step {} does not match the pending step {}",
                                        output.step, awaiting_update_ ? step_ : -1));
  // Validate everything first so an error leaves no partial update. Requests
  // finished or aborted since schedule() are skipped.
  auto live = [&](const ScheduledRequest& s) -> Request* {
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) return nullptr;
    Request* r = it->second.get();
    if (r->status() != RequestStatus::running || r->num_computed_tokens() != s.num_computed_tokens) return nullptr;
    return r;
  };
  for (const ScheduledRequest& s : output.scheduled) {
    if (!s.needs_logits || !live(s)) continue;
    auto it = tokens.find(s.request_id);
    if (it == tokens.end() || it->second.token_ids.empty())
      return invalid_argument(fmt::format("update_from_output: no sampled token for request '{}'", s.request_id));
    if (it->second.token_ids.size() > s.draft_token_ids.size() + 1)
      return invalid_argument(fmt::format("update_from_output: request '{}' got {} tokens for {} drafts",
                                          s.request_id, it->second.token_ids.size(), s.draft_token_ids.size()));
  }

  std::vector<RequestUpdate> updates;
  for (const ScheduledRequest& s : output.scheduled) {
    Request* r = live(s);
    if (!r) continue;
    const int64_t scheduled_end = s.num_computed_tokens + static_cast<int64_t>(s.token_ids.size());
    if (!s.needs_logits) {
      r->set_num_computed_tokens(scheduled_end);
      continue;
    }
    const StepTokens& step_tokens = tokens.at(s.request_id);
    // The drafts after the accepted ones were computed into KV slots that now hold
    // nothing valid: roll back over them, so that later steps compute them again.
    const auto num_accepted = static_cast<int64_t>(step_tokens.token_ids.size()) - 1;
    const int64_t num_rejected = static_cast<int64_t>(s.draft_token_ids.size()) - num_accepted;
    RequestUpdate u;
    u.request_id = s.request_id;
    for (int32_t token : step_tokens.token_ids) {
      r->append_output_token(token);
      u.new_token_ids.push_back(token);
      if (r->num_output_tokens() >= r->max_tokens() || r->num_tokens() >= max_model_len_) {
        u.finished = true;
        break;
      }
    }
    r->set_num_computed_tokens(std::min(scheduled_end - num_rejected, r->num_tokens() - (u.finished ? 0 : 1)));
    if (u.finished) {
      u.finish_reason = FinishReason::length;
      remove(r, RequestStatus::finished_length);
    } else {
      // The next step emits 1 + accepted drafts: keep it within max_tokens and the model length.
      const int64_t room = std::min(r->max_tokens() - r->num_output_tokens(), max_model_len_ - r->num_tokens()) - 1;
      std::vector<int32_t> drafts = step_tokens.draft_token_ids;
      if (static_cast<int64_t>(drafts.size()) > room) drafts.resize(static_cast<size_t>(std::max<int64_t>(0, room)));
      r->set_spec_token_ids(std::move(drafts));
    }
    updates.push_back(std::move(u));
  }
  awaiting_update_ = false;
  return updates;
}

Status Scheduler::finish_request(const std::string& request_id, FinishReason reason) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return not_found(fmt::format("no live request '{}'", request_id));
  remove(it->second.get(), finished_status(reason));
  return Status::ok_status();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = last_step_;
  s.num_running_reqs = num_running();
  s.num_waiting_reqs = num_waiting();
  s.kv_cache_usage = kv_.usage();
  return s;
}

}  // namespace troupe::sched
