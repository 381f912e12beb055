// The routing policy registry and the built-in policies (troupe/routing/routing_policy.hpp).
#include "troupe/routing/routing_policy.hpp"

#include <algorithm>
#include <limits>

#include "named_factories.hpp"

namespace troupe::routing {
namespace {

/// Each request to the next serving replica in index order.
class RoundRobinPolicy final : public RoutingPolicy {
 public:
  int32_t choose(const RoutingRequest&, std::span<const ReplicaState> replicas) override {
    const auto n = static_cast<int32_t>(replicas.size());
    for (int32_t tried = 0; tried < n; ++tried) {
      const int32_t i = next_++ % n;
      if (replicas[static_cast<size_t>(i)].serving) return i;
    }
    return -1;
  }

 private:
  int64_t next_ = 0;
};

/// Whether `a` is less loaded than `b`: fewer requests in flight (the router's own,
/// exact count; a replica's stats lag by a step), then lower KV usage, then index.
bool less_loaded(const ReplicaState& a, const ReplicaState& b) {
  if (a.num_in_flight != b.num_in_flight) return a.num_in_flight < b.num_in_flight;
  if (a.kv_cache_usage != b.kv_cache_usage) return a.kv_cache_usage < b.kv_cache_usage;
  return a.index < b.index;
}

int32_t least_loaded_of(std::span<const ReplicaState> replicas) {
  int32_t best = -1;
  for (size_t i = 0; i < replicas.size(); ++i)
    if (replicas[i].serving && (best < 0 || less_loaded(replicas[i], replicas[static_cast<size_t>(best)])))
      best = static_cast<int32_t>(i);
  return best;
}

class LeastLoadedPolicy final : public RoutingPolicy {
 public:
  int32_t choose(const RoutingRequest&, std::span<const ReplicaState> replicas) override {
    return least_loaded_of(replicas);
  }
};

/// The default. A replica whose load is uneven — more requests in flight than the least
/// loaded one by more than max(kSlackRequests, kSlackShare x that one's) — is left out;
/// among the others the cost is the prompt's blocks it would compute (not in its prefix
/// cache) plus kLoadWeight blocks per request in flight; the lowest cost wins (ties: the
/// less loaded). So a prefix sticks to the replicas holding it until they are busier
/// than the rest, and then spreads to the least loaded, which caches it in turn.
class PrefixAffinityPolicy final : public RoutingPolicy {
 public:
  static constexpr int64_t kSlackRequests = 2;
  static constexpr double kSlackShare = 0.2;
  static constexpr double kLoadWeight = 1.0;

  int32_t choose(const RoutingRequest& request, std::span<const ReplicaState> replicas) override {
    const int32_t lightest = least_loaded_of(replicas);
    if (lightest < 0) return -1;
    const int64_t min_load = replicas[static_cast<size_t>(lightest)].num_in_flight;
    const double slack = std::max(static_cast<double>(kSlackRequests), kSlackShare * static_cast<double>(min_load));
    int32_t best = -1;
    double best_cost = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < replicas.size(); ++i) {
      const ReplicaState& r = replicas[i];
      if (!r.serving || static_cast<double>(r.num_in_flight - min_load) > slack) continue;
      const int64_t to_compute = std::max<int64_t>(0, request.num_prompt_blocks - r.num_cached_prompt_blocks);
      const double cost = static_cast<double>(to_compute) + kLoadWeight * static_cast<double>(r.num_in_flight);
      if (best < 0 || cost < best_cost ||
          (cost == best_cost && less_loaded(r, replicas[static_cast<size_t>(best)]))) {
        best = static_cast<int32_t>(i);
        best_cost = cost;
      }
    }
    return best;
  }
  bool uses_prefix_cache() const override { return true; }
};

template <class Policy>
Result<std::unique_ptr<RoutingPolicy>> make(const ConfigView&) {
  return std::unique_ptr<RoutingPolicy>(std::make_unique<Policy>());
}

detail::NamedFactories<RoutingPolicyFactory>& registry() {
  static detail::NamedFactories<RoutingPolicyFactory> r("Routing policy",
                                                        {{kRoundRobinPolicy, &make<RoundRobinPolicy>},
                                                         {kLeastLoadedPolicy, &make<LeastLoadedPolicy>},
                                                         {kPrefixAffinityPolicy, &make<PrefixAffinityPolicy>}});
  return r;
}

}  // namespace

namespace routing_policy_registry {

void register_policy(std::string_view name, RoutingPolicyFactory factory) { registry().add(name, factory); }

std::vector<std::string> registered_policies() { return registry().names(); }

Result<std::unique_ptr<RoutingPolicy>> create(std::string_view name, const ConfigView& config) {
  RoutingPolicyFactory factory = registry().find(name);
  if (!factory)
    return not_found("routing policy '" + std::string(name) + "' (--routing-policy) is not registered; registered: " +
                     registry().joined_names() + " (a general plugin registers more; is it loaded? see `troupe plugins`)");
  auto policy = factory(config);
  if (policy && !*policy) return internal_error("routing policy '" + std::string(name) + "': its factory returned null");
  return policy;
}

}  // namespace routing_policy_registry
}  // namespace troupe::routing
