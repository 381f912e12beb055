#include "troupe/scheduler_policy.hpp"

#include "named_factories.hpp"

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

Result<std::unique_ptr<SchedulerPolicy>> make_fcfs(const ConfigView&) {
  return std::unique_ptr<SchedulerPolicy>(std::make_unique<FcfsPolicy>());
}

detail::NamedFactories<SchedulerPolicyFactory>& registry() {
  static detail::NamedFactories<SchedulerPolicyFactory> r("Scheduler policy", {{kFcfsSchedulerPolicy, &make_fcfs}});
  return r;
}

}  // namespace

void register_policy(std::string_view name, SchedulerPolicyFactory factory) { registry().add(name, factory); }

std::vector<std::string> registered_policies() { return registry().names(); }

bool is_registered(std::string_view name) { return registry().find(name) != nullptr; }

Result<std::unique_ptr<SchedulerPolicy>> create(std::string_view name, const ConfigView& config) {
  SchedulerPolicyFactory factory = registry().find(name);
  if (!factory) {
    const std::string list = registry().joined_names();
    return not_found("scheduler policy '" + std::string(name) + "' (--scheduler-cls) is not registered; registered: " +
                     list + " (a general plugin registers more; is it loaded? see `troupe plugins`)");
  }
  auto policy = factory(config);
  if (policy && !*policy) return internal_error("scheduler policy '" + std::string(name) + "': its factory returned null");
  return policy;
}

}  // namespace troupe::scheduler_policy_registry
