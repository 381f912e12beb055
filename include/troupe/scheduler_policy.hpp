// SchedulerPolicy: which requests the scheduler serves first (vLLM's
// --scheduler-cls / scheduling policy). The engine's scheduler keeps the
// mechanics (token budget, seats, KV blocks, chunked prefill, prefix cache);
// a policy only orders requests:
//   - waiting requests are admitted in policy order (first = admitted first);
//   - when KV blocks run out, the running request that is last in policy
//     order is preempted first (ties: the most recently admitted one).
// A policy is registered by name (built in: "fcfs"; general plugins add
// more) and chosen with the setting "scheduler.scheduler_cls"
// (`--scheduler-cls NAME`, or a platform's check_and_update_config).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/config_view.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// What a policy sees of one request. A waiting request's fields do not change
/// while it waits, so an order over them stays valid.
struct SchedulingRequest {
  std::string_view request_id;
  int32_t priority = 0;           // the request's priority (vLLM: lower is served first; default 0)
  int64_t arrival_order = 0;      // 0, 1, 2, ... in the order requests were added
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;  // sampled so far (non-zero after a preemption)
};

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  /// True when `a` is to be served before `b`. Must be a strict weak ordering
  /// that depends only on the fields above. Called on the scheduler's thread.
  virtual bool before(const SchedulingRequest& a, const SchedulingRequest& b) const = 0;
  /// Whether this policy reads SchedulingRequest::priority. A request with a
  /// non-zero priority is refused under a policy that ignores it (as vLLM
  /// refuses priorities without priority scheduling).
  virtual bool uses_priority() const { return false; }
};

/// Makes a policy for an engine. An error stops the engine's start with its message.
using SchedulerPolicyFactory = Result<std::unique_ptr<SchedulerPolicy>> (*)(const ConfigView& config);

/// The built-in policy's name: first come, first served (by arrival order).
inline constexpr const char* kFcfsSchedulerPolicy = "fcfs";

namespace scheduler_policy_registry {
/// Register `factory` as `name`. Registering the same factory again is a
/// no-op (plugin registration may run again); another factory under a taken
/// name replaces it with a warning.
void register_policy(std::string_view name, SchedulerPolicyFactory factory);
/// Sorted names of every registered policy ("fcfs" included).
std::vector<std::string> registered_policies();
bool is_registered(std::string_view name);
/// A new policy named `name`; not_found lists the registered ones.
Result<std::unique_ptr<SchedulerPolicy>> create(std::string_view name, const ConfigView& config);
}  // namespace scheduler_policy_registry

}  // namespace troupe
