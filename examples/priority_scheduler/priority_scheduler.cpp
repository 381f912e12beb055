// Example general plugin: registers the scheduler policy "priority", vLLM's
// priority scheduling. Requests are served in order of their `priority`
// (lower first; ties by arrival), and when KV blocks run out the running
// request with the highest priority value (the latest among equals) is
// preempted first. Choose it with `--scheduler-cls priority`.
//
// Registration runs in every process that loads general plugins and may run
// again: registering the same factory pointer twice is a no-op.
#include "troupe/plugin.hpp"
#include "troupe/scheduler_policy.hpp"

namespace {

class PriorityPolicy final : public troupe::SchedulerPolicy {
 public:
  bool before(const troupe::SchedulingRequest& a, const troupe::SchedulingRequest& b) const override {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.arrival_order < b.arrival_order;
  }
  bool uses_priority() const override { return true; }
};

troupe::Result<std::unique_ptr<troupe::SchedulerPolicy>> make_priority(const troupe::ConfigView& /*config*/) {
  return std::unique_ptr<troupe::SchedulerPolicy>(std::make_unique<PriorityPolicy>());
}

troupe::Status register_priority_scheduler() {
  troupe::scheduler_policy_registry::register_policy("priority", &make_priority);
  return {};
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("priority_scheduler", &register_priority_scheduler))
