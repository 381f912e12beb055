#include "troupe/scheduler_policy.hpp"

#include <map>
#include <mutex>

#include "troupe/log.hpp"

namespace troupe::scheduler_policy_registry {
namespace {

/// First come, first served: arrival order. The scheduler then admits in
/// arrival order and preempts the latest arrival first, as vLLM's FCFS does.
class FcfsPolicy final : public SchedulerPolicy {
 public:
  bool before(const SchedulingRequest& a, const SchedulingRequest& b) const override {
    return a.arrival_order < b.arrival_order;
  }
};

Result<std::unique_ptr<SchedulerPolicy>> make_fcfs(const EngineConfig&) {
  return std::unique_ptr<SchedulerPolicy>(std::make_unique<FcfsPolicy>());
}

struct Registry {
  std::mutex mu;
  std::map<std::string, SchedulerPolicyFactory, std::less<>> factories{{kFcfsSchedulerPolicy, &make_fcfs}};
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_policy(std::string_view name, SchedulerPolicyFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.factories.find(name);
  if (it != r.factories.end()) {
    if (it->second == factory) return;  // the same registration again: idempotent
    TROUPE_LOG_WARNING("Scheduler policy {} is already registered, and will be overwritten by the new one.", name);
    it->second = factory;
    return;
  }
  r.factories.emplace(std::string(name), factory);
}

std::vector<std::string> registered_policies() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [name, f] : r.factories) out.push_back(name);
  return out;
}

bool is_registered(std::string_view name) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  return r.factories.find(name) != r.factories.end();
}

Result<std::unique_ptr<SchedulerPolicy>> create(std::string_view name, const EngineConfig& config) {
  SchedulerPolicyFactory factory = nullptr;
  {
    auto& r = registry();
    std::lock_guard lock(r.mu);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string list;
    for (const auto& n : registered_policies()) list += (list.empty() ? "" : ", ") + n;
    return not_found("scheduler policy '" + std::string(name) + "' (--scheduler-cls) is not registered; registered: " +
                     list + " (a general plugin registers more; is it loaded? see `troupe plugins`)");
  }
  auto policy = factory(config);
  if (policy && !*policy) return internal_error("scheduler policy '" + std::string(name) + "': its factory returned null");
  return policy;
}

}  // namespace troupe::scheduler_policy_registry
