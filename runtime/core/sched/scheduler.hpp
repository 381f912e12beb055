// The scheduling policy of one engine step (vLLM v1 Scheduler semantics),
// plain C++ so it runs and is tested without actors or a device.
//
// One step: schedule() picks, under a token budget and a seat limit, how many
// tokens each request advances (running requests first, in admission order,
// then waiting ones in the policy's order with prefix-cache hits and chunked
// prefill), preempting by recompute the running request that is last in the
// policy's order when blocks run out. The policy (troupe/scheduler_policy.hpp)
// only orders requests; the default, FCFS, orders them by arrival: admission
// in arrival order, the latest arrival preempted first. The caller runs the
// model on the result, then calls update_from_output() with the sampled tokens
// before the next schedule().
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/sched/kv_cache_manager.hpp"
#include "runtime/core/sched/request.hpp"
#include "troupe/scheduler_policy.hpp"
#include "runtime/core/stats/engine_stats.hpp"
#include "troupe/status.hpp"

namespace troupe::sched {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // token budget of one step
  int32_t max_num_seqs = 256;             // running requests at most
  /// Prompt + max_tokens limit of one request; 0 means what the KV cache holds.
  int64_t max_model_len = 0;
  /// Off: a prompt that does not fit the remaining budget waits for a later step.
  bool enable_chunked_prefill = true;
  /// LoRA: distinct adapters in one step at most (vLLM's --max-loras); 0: LoRA is off.
  int32_t max_loras = 0;
};

/// One request's share of a step.
struct ScheduledRequest {
  std::string request_id;
  std::vector<int32_t> token_ids;     // tokens to compute this step
  int64_t num_computed_tokens = 0;    // tokens already in the KV cache before the step
  std::vector<int32_t> block_table;   // all its blocks, in sequence order
  bool needs_logits = false;          // this step reaches its last known token: sample
  bool is_new = false;                // first step since admission (new or resumed after preemption)
  int64_t lora_id = 0;                // its LoRA adapter (0: the base model)
  /// Speculative decoding: the drafts at the end of token_ids, to verify this step (needs_logits
  /// is then set, and the batch asks for logits after the last known token and after each draft).
  std::vector<int32_t> draft_token_ids;
};

struct SchedulerOutput {
  int64_t step = 0;
  int32_t block_size = 0;
  std::vector<ScheduledRequest> scheduled;
  int64_t num_scheduled_tokens = 0;
  std::vector<std::string> preempted_ids;  // lost their KV this step; rescheduled later from scratch
  std::vector<std::string> finished_ids;   // finished or aborted since the previous step
  bool empty() const { return scheduled.empty(); }
};

/// What the driver rank produced for one request of a step: the tokens it emitted
/// (1 + the drafts it accepted) and the drafts it proposes for the next step.
struct StepTokens {
  std::vector<int32_t> token_ids;
  std::vector<int32_t> draft_token_ids;
};

/// What a step did to one request.
struct RequestUpdate {
  std::string request_id;
  std::vector<int32_t> new_token_ids;
  bool finished = false;
  FinishReason finish_reason = FinishReason::stop;  // meaningful when finished
};

class Scheduler {
 public:
  /// `policy` orders the requests; null: the built-in FCFS policy.
  Scheduler(SchedulerConfig config, KvCacheConfig kv_config, std::shared_ptr<const SchedulerPolicy> policy = nullptr);

  /// Queues a request. invalid_argument for an empty prompt, a duplicate id,
  /// max_tokens < 1 or a non-zero priority under a policy that ignores
  /// priorities; out_of_range when prompt + max_tokens can never fit (longer
  /// than max_model_len or than the whole KV cache).
  Status add_request(NewRequest request);

  /// Plans the next step. Must be followed by update_from_output() before the
  /// next call (an empty output needs none). If the step fails on the device,
  /// finish its requests with FinishReason::error, then call
  /// update_from_output(output, {}) to close the step (and reset the prefix
  /// cache once idle: blocks are cached when allocated, before they are filled).
  SchedulerOutput schedule();

  /// Applies a step's results: advances computed tokens, appends each sampled
  /// token (`sampled` must hold one for every live request with needs_logits)
  /// and finishes requests that reached max_tokens. Nothing changes when it
  /// returns an error.
  Result<std::vector<RequestUpdate>> update_from_output(
      const SchedulerOutput& output, const std::unordered_map<std::string, int32_t>& sampled);
  /// update_from_output() with speculative decoding: each request's emitted tokens (the verified drafts
  /// and one more) and its next drafts. The drafts it rejected are rolled back (their KV
  /// slots are computed again by later steps); tokens past max_tokens or the model length
  /// are dropped, and new drafts are cut so that the next step cannot pass either.
  Result<std::vector<RequestUpdate>> update_from_tokens(const SchedulerOutput& output,
                                                       const std::unordered_map<std::string, StepTokens>& tokens);

  /// Ends a request the engine decided is done (stop string, EOG, error);
  /// its blocks are freed at once. not_found when it is not live.
  Status finish_request(const std::string& request_id, FinishReason reason);
  /// finish_request(id, abort); works for waiting and running requests.
  Status abort_request(const std::string& request_id) { return finish_request(request_id, FinishReason::abort); }

  /// LoRA: adapters requests may name (once every rank holds them). add: invalid_argument
  /// when LoRA is off (max_loras 0) or the id is known; remove: not_found when unknown,
  /// unavailable while live requests use it.
  Status add_lora(int64_t lora_id);
  Status remove_lora(int64_t lora_id);
  bool has_lora(int64_t lora_id) const { return loras_.contains(lora_id); }
  /// Live requests (waiting or running) that use adapter `lora_id`.
  int32_t num_requests_with_lora(int64_t lora_id) const;

  bool has_unfinished_requests() const { return !requests_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  /// A live request, or nullptr.
  const Request* find_request(const std::string& request_id) const;

  /// Running/waiting/usage now; step counters of the latest schedule().
  SchedulerStats stats() const;
  const KvCacheManager& kv_cache() const { return kv_; }
  KvCacheManager& kv_cache() { return kv_; }
  const SchedulerConfig& config() const { return config_; }
  const SchedulerPolicy& policy() const { return *policy_; }
  int64_t max_model_len() const { return max_model_len_; }

 private:
  /// Whether `a` comes before `b` in the policy's order.
  bool before(const Request& a, const Request& b) const;
  /// Into the waiting queue at its place in the policy's order (after equals).
  void enqueue_waiting(Request* request);
  /// The running request to preempt first: last in the policy's order, the
  /// most recently admitted among equals.
  Request* pick_victim() const;
  void preempt(Request* request);
  void remove(Request* request, RequestStatus status);
  ScheduledRequest make_scheduled(const Request& request, int64_t num_new_tokens, bool is_new) const;

  SchedulerConfig config_;
  std::shared_ptr<const SchedulerPolicy> policy_;
  KvCacheManager kv_;
  int64_t max_model_len_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;  // live requests
  std::deque<Request*> waiting_;   // in the policy's order (FCFS: arrival; a preempted request goes back to the front)
  std::vector<Request*> running_;  // admission order; the tail is preempted first
  std::vector<std::string> finished_since_schedule_;
  std::set<int64_t> loras_;        // adapters every rank holds
  int64_t next_arrival_ = 0;
  int64_t step_ = 0;
  bool awaiting_update_ = false;
  SchedulerStats last_step_;
};

}  // namespace troupe::sched
