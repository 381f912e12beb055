// RoutingPolicy: which replica serves a request when the engine runs several
// (`troupe serve --data-parallel-size N`). The engine's router keeps, per replica,
// the block hashes its prefix cache holds (from the replica's own KV events) and its
// load; a policy sees both for one request and names the replica. Registered by
// name, like scheduler policies (built in: "round_robin", "least_loaded",
// "prefix_affinity"; general plugins add more) and chosen by name
// (`troupe serve --routing-policy NAME`). docs/router.md explains the built-ins.
//
// This header is not part of the SDK fingerprint (include/troupe/*.hpp), as
// named_ops/ is not: adding to it rebuilds no plugin. The rule that makes that safe:
// what is published here never changes. A struct or class that needs another field or
// method gets a new name (ReplicaStateV2, RoutingPolicyV2, a new register function),
// and the engine keeps serving the old one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/config_view.hpp"
#include "troupe/status.hpp"

namespace troupe::routing {

/// One replica as the router sees it when a request arrives.
struct ReplicaState {
  int32_t index = 0;                 // the replica (data parallel rank), 0 .. N-1
  bool serving = true;               // false: lost or failed; never choose it
  int32_t num_running = 0;           // from the replica's last step
  int32_t num_waiting = 0;           // from the replica's last step
  double kv_cache_usage = 0.0;       // 0..1, from the replica's last step
  int64_t num_in_flight = 0;         // requests routed to it that have not finished (current, exact)
  int64_t num_cached_prompt_blocks = 0;  // of this prompt's full blocks, how many from the first it holds
};

/// What a policy sees of the request.
struct RoutingRequest {
  std::string_view request_id;
  int64_t num_prompt_tokens = 0;
  int64_t num_prompt_blocks = 0;     // full blocks of the prompt (num_prompt_tokens / block_size)
  int32_t block_size = 0;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  /// The position in `replicas` of the replica to serve `request`; it must be serving.
  /// Anything else (negative, out of range, not serving) fails the request naming the
  /// policy. At least one replica is serving when it is called. Called on the router's
  /// thread only, one request at a time.
  virtual int32_t choose(const RoutingRequest& request, std::span<const ReplicaState> replicas) = 0;
  /// Whether choose() reads num_cached_prompt_blocks: only then does the router hash
  /// each prompt's blocks and match them against the replicas' caches.
  virtual bool uses_prefix_cache() const { return false; }
};

/// Makes a policy for an engine; an error stops the engine's start with its message.
using RoutingPolicyFactory = Result<std::unique_ptr<RoutingPolicy>> (*)(const ConfigView& config);

/// The default policy: the fewest prompt blocks to compute plus the load, or the least
/// loaded replica while the load is uneven (docs/router.md).
inline constexpr const char* kPrefixAffinityPolicy = "prefix_affinity";
inline constexpr const char* kRoundRobinPolicy = "round_robin";
inline constexpr const char* kLeastLoadedPolicy = "least_loaded";

namespace routing_policy_registry {
/// Register `factory` as `name`. Registering the same factory again is a no-op;
/// another factory under a taken name replaces it with a warning.
void register_policy(std::string_view name, RoutingPolicyFactory factory);
/// Sorted names of every registered policy (the built-ins included).
std::vector<std::string> registered_policies();
/// A new policy named `name`; not_found lists the registered ones.
Result<std::unique_ptr<RoutingPolicy>> create(std::string_view name, const ConfigView& config);
}  // namespace routing_policy_registry

}  // namespace troupe::routing
