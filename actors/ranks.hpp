// Starting the ranks of a model on their nodes: placement, a worker actor per
// rank from its node's plugin host, and the model loaded on all of them in one
// collective call (actors/rank_group.hpp). The KV cache follows through
// engine::set_up_kv_cache. Used by Engine::start and by the node supervisor
// when it rebuilds lost ranks.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/rank_group.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::actors {

/// Where the ranks of a model run.
struct RankLayout {
  std::vector<plugin_host_actor> nodes;      // one plugin host per node
  std::vector<std::string> node_names;       // "node 127.0.0.1:7001"; empty for this process
  std::vector<std::string> node_addresses;   // "127.0.0.1:7001" as given; empty for this process
  std::vector<size_t> node_of_rank;          // rank → index into nodes

  /// "node 127.0.0.1:7001" of `rank`, or "" when it runs in this process.
  std::string place(size_t rank) const { return node_names[node_of_rank[rank]]; }
  std::vector<std::string> places() const;
};

/// Rank-major placement of `world` ranks over `num_nodes` nodes: consecutive
/// ranks share a node (rank r on node r * num_nodes / world).
std::vector<size_t> place_ranks(int world, size_t num_nodes);

/// Whether the ranks' communicator must work between hosts: TROUPE_CPU_COMM=tcp forces it
/// (to test it on one machine), =shm forbids it; unset or "auto": when the nodes of the ranks
/// name more than one distinct host in their addresses. Another value: invalid_argument.
Result<bool> communicator_across_hosts(const RankLayout& layout);

/// A fresh communicator id for the ranks of `layout`, made by the plugin host of rank 0's node
/// (rank 0's communicator runs in that process and may hold what the id names, such as a
/// listening socket). Across hosts (communicator_across_hosts), the request carries
/// parallel.communicator_host = the host of rank 0's node as this process reaches it.
/// `device` names the platform plugin the node activates (the head's, EngineConfig::device).
Result<std::string> make_communicator_id(caf::actor_system& system, const RankLayout& layout,
                                         ParallelConfig parallel, const std::string& device,
                                         std::chrono::milliseconds timeout);

/// The ranks of `layout` as a RankGroup over `workers`, each command bounded by `timeout`.
RankGroup rank_group(const RankLayout& layout, std::vector<worker_actor> workers, std::chrono::milliseconds timeout);

/// A new worker actor per rank from its node's plugin host, each loading the
/// model (LoadModel on every rank). `replies` (optional) gets each rank's answer.
/// The first failure is returned, naming the rank and its node; the workers
/// started are stopped then.
Result<std::vector<worker_actor>> start_workers(caf::actor_system& system, const RankLayout& layout,
                                                const EngineConfig& config, std::vector<WorkerInitReply>* replies,
                                                std::chrono::milliseconds timeout);

}  // namespace troupe::actors
