// One request as the scheduler sees it: known tokens (prompt + sampled), how
// many of them are already in the KV cache, and its lifecycle status.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/sched/block_hash.hpp"
#include "runtime/protocol/finish_reason.hpp"

namespace troupe::sched {

enum class RequestStatus {
  waiting,
  running,
  preempted,          // evicted by recompute; back in the waiting queue
  finished_stopped,   // the engine saw a stop condition (EOG, stop string)
  finished_length,    // reached max_tokens or the model length
  finished_aborted,   // cancelled by the client
  finished_error,     // the engine gave up on it (worker failure, ...)
};

const char* to_string(RequestStatus status);
bool is_finished(RequestStatus status);
RequestStatus finished_status(FinishReason reason);

/// What a caller submits.
struct NewRequest {
  std::string id;
  std::vector<int32_t> prompt_token_ids;
  int64_t max_tokens = 16;               // tokens to generate at most (>= 1)
  std::optional<std::string> cache_salt; // isolates this request's prefix cache entries
  /// A pooling request: its prompt is all it computes (max_tokens is 1 for the
  /// bookkeeping), so only the prompt counts against the model length.
  bool prompt_only = false;
  /// Served earlier the lower it is (vLLM), under a policy that reads it (SchedulerPolicy::uses_priority).
  int32_t priority = 0;
  /// The LoRA adapter the request runs with (0: the base model); its KV blocks are cached apart.
  int64_t lora_id = 0;
};

class Request {
 public:
  Request(NewRequest spec, int64_t arrival_order);

  const std::string& id() const { return id_; }
  const std::vector<int32_t>& prompt_token_ids() const { return prompt_; }
  const std::vector<int32_t>& output_token_ids() const { return output_; }
  /// Prompt followed by outputs: every token whose KV will be computed.
  const std::vector<int32_t>& all_token_ids() const { return all_; }
  int64_t num_prompt_tokens() const { return static_cast<int64_t>(prompt_.size()); }
  int64_t num_output_tokens() const { return static_cast<int64_t>(output_.size()); }
  int64_t num_tokens() const { return static_cast<int64_t>(all_.size()); }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t arrival_order() const { return arrival_order_; }
  int32_t priority() const { return priority_; }
  const std::optional<std::string>& cache_salt() const { return cache_salt_; }
  int64_t lora_id() const { return lora_id_; }

  RequestStatus status() const { return status_; }
  void set_status(RequestStatus s) { status_ = s; }
  /// Tokens whose KV is in the cache (cache hits included).
  int64_t num_computed_tokens() const { return num_computed_tokens_; }
  void set_num_computed_tokens(int64_t n);

  void append_output_token(int32_t token);

  /// Speculative decoding: draft tokens to verify in the next step, after the known tokens.
  /// They are not in all_token_ids() and never counted as computed.
  const std::vector<int32_t>& spec_token_ids() const { return spec_; }
  void set_spec_token_ids(std::vector<int32_t> drafts) { spec_ = std::move(drafts); }

  /// Hashes of the full blocks of all_token_ids(), kept current lazily by the
  /// KV cache manager (they depend on the block size).
  std::vector<BlockHash>& block_hashes() { return block_hashes_; }
  const std::vector<BlockHash>& block_hashes() const { return block_hashes_; }

 private:
  std::string id_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> output_;
  std::vector<int32_t> all_;
  std::vector<int32_t> spec_;
  int64_t max_tokens_;
  int64_t arrival_order_;
  int32_t priority_;
  std::optional<std::string> cache_salt_;
  int64_t lora_id_ = 0;
  RequestStatus status_ = RequestStatus::waiting;
  int64_t num_computed_tokens_ = 0;
  std::vector<BlockHash> block_hashes_;
};

}  // namespace troupe::sched
