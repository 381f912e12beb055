// DpRouter: which data parallel replica serves each request (the router actor's
// decisions, without actors). Per replica it keeps the set of block hashes its prefix
// cache holds, replayed from the replica's own KV events (stored, removed, cleared), its
// load (running, waiting and KV usage from its last step; the requests routed to it and
// not finished, counted here exactly) and its health. A request pinned to a replica
// (X-data-parallel-rank) goes there; any other is the routing policy's choice among the
// replicas that serve.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/sched/kv_events.hpp"
#include "troupe/routing/routing_policy.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// What a replica's scheduler tells the router after each of its outputs (process-local).
struct ReplicaUpdate {
  int32_t replica = 0;
  bool has_stats = false;               // the numbers below are the replica's state after a step
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  double kv_cache_usage = 0.0;
  std::vector<sched::KvEvent> kv_events;
  std::vector<std::string> finished_ids;  // ended (any reason) or refused since the last update
  Status health;                          // not ok: the replica does not serve (its reason)
};

class DpRouter {
 public:
  /// `num_replicas` replicas whose caches use `block_size`-token blocks.
  DpRouter(int32_t num_replicas, int32_t block_size, std::unique_ptr<routing::RoutingPolicy> policy,
           std::string policy_name);

  /// The replica to serve `request` (counted in flight there until it finishes). Errors:
  /// a pin out of range (invalid_argument) or to a replica that does not serve, no replica
  /// serving, a policy that names no serving replica (unavailable, naming them).
  Result<int32_t> route(const CoreRequest& request);
  /// Applies a replica's report: load, KV events, finished requests, health.
  void update(const ReplicaUpdate& update);
  /// The replica a routed, unfinished request runs on; -1 when none.
  int32_t replica_of(const std::string& request_id) const;

  int32_t num_replicas() const { return static_cast<int32_t>(replicas_.size()); }
  /// The replicas as the policy last saw them (num_cached_prompt_blocks of the last request).
  const std::vector<routing::ReplicaState>& states() const { return states_; }
  /// Block hashes replica `r`'s prefix cache holds, as its events said (tests).
  size_t num_cached_blocks(int32_t r) const { return replicas_.at(static_cast<size_t>(r)).cached.size(); }
  /// Leading blocks of `hashes` replica `r` holds (the chain stops at the first miss).
  int64_t cached_prefix_blocks(int32_t r, const std::vector<sched::BlockHash>& hashes) const;

 private:
  struct Replica {
    std::unordered_set<sched::BlockHash, sched::BlockHashHasher> cached;
    Status health;
  };
  std::string describe_not_serving() const;

  int32_t block_size_;
  std::unique_ptr<routing::RoutingPolicy> policy_;
  std::string policy_name_;
  std::vector<Replica> replicas_;
  std::vector<routing::ReplicaState> states_;
  std::unordered_map<std::string, int32_t> live_;  // request id -> replica
};

}  // namespace troupe::engine
