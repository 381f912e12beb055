// Engine::start's part 2 per data parallel replica: where each replica's ranks run
// (this process, local node processes the head starts, or --nodes), connecting to
// those nodes, the communicator of its ranks, its workers with the model loaded and its
// KV cache. One replica (no --data-parallel-size) is exactly the engine's ranks as
// they always were; with N replicas each has tp x pp ranks of its own, in processes of
// their own (docs/router.md).
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/ranks.hpp"
#include "net/link_guard.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::actors {

/// Where one replica's ranks run.
struct ReplicaPlace {
  std::vector<std::string> nodes;  // "HOST:PORT" of its nodes in rank-major order; empty: this process
  bool local = false;              // node processes this head started (loopback, a fresh secret, no TLS)
};

/// Where each of `data_parallel_size` replicas of `world` ranks runs. Replicas
/// 0 .. local_replicas-1 run on `local_nodes` (world consecutive processes each; empty for
/// one replica of one rank: this process), the others share `remote_nodes` evenly, in order.
/// Errors name the flags (--nodes, --data-parallel-size-local) and the counts that do not fit.
Result<std::vector<ReplicaPlace>> place_replicas(int data_parallel_size, int local_replicas, int world,
                                                 const std::vector<std::string>& local_nodes,
                                                 const std::vector<std::string>& remote_nodes);

/// One replica's ranks, started.
struct ReplicaRanks {
  int32_t index = 0;
  EngineConfig config;        // the replica's own: its communicator id and secret
  ReplicaPlace place;
  net::LinkAuth auth;         // how its nodes are reached
  RankLayout layout;
  std::vector<worker_actor> workers;
  engine::KvCachePlan kv_plan;
  WorkerInitReply first_reply;  // rank 0's answer to LoadModel (the model's info)
  /// Where each rank runs, for errors: "node H:P", prefixed "replica R, " with several replicas.
  std::vector<std::string> rank_places(int data_parallel_size) const;
};

struct ReplicaStart {
  int32_t index = 0;
  EngineConfig config;               // after the platform's check_and_update_config
  ReplicaPlace place;
  net::LinkAuth auth;
  plugin_host_actor own_plugin_host;  // this process's, for a replica whose rank runs here
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

/// Connects the replica's nodes, makes its communicator, starts a worker per rank with the
/// model loaded and sets up its KV cache (engine::set_up_kv_cache). Errors name the replica
/// when there are several (`data_parallel_size`).
Result<ReplicaRanks> start_replica(caf::actor_system& system, ReplicaStart start, int data_parallel_size);

}  // namespace troupe::actors
