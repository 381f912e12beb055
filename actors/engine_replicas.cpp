#include "actors/engine_replicas.hpp"

#include <caf/all.hpp>

#include <algorithm>

#include "actors/gate_actor.hpp"
#include "net/crypto.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

std::string replica_prefix(int32_t index, int data_parallel_size) {
  return data_parallel_size > 1 ? "replica " + std::to_string(index) + ": " : "";
}

// The replica's nodes, connected and checked (a node off loopback needs a secret or TLS).
Status connect_replica_nodes(caf::actor_system& system, const ReplicaStart& start, RankLayout* layout) {
  const int world = start.config.parallel.world_size();
  if (start.place.nodes.empty()) {
    layout->nodes = {start.own_plugin_host};
    layout->node_names = {""};
    layout->node_addresses = {""};
    layout->node_of_rank = place_ranks(world, 1);
    return {};
  }
  for (const auto& address : start.place.nodes) {
    std::string host;
    uint16_t port = 0;
    TROUPE_RETURN_IF_ERROR(parse_host_port(address, "--nodes", &host, &port));
    if (!start.auth.authenticates() && !is_loopback_host(host))
      return invalid_argument("node " + address + " is not on loopback: its link needs --secret-file or TLS "
                              "(--tls-cert, --tls-key, --tls-ca), as the node itself does");
    auto node = connect_node(system, host, port, start.auth, std::chrono::seconds(30));
    if (!node) return node.status();
    TROUPE_LOG_INFO("connected to node {}", address);
    layout->nodes.push_back(*node);
    layout->node_names.push_back("node " + address);
    layout->node_addresses.push_back(address);
  }
  layout->node_of_rank = place_ranks(world, layout->nodes.size());
  return {};
}

Status start_ranks(caf::actor_system& system, ReplicaStart& start, ReplicaRanks* out) {
  TROUPE_RETURN_IF_ERROR(connect_replica_nodes(system, start, &out->layout));
  auto& config = start.config;
  const int world = config.parallel.world_size();
  if (world > 1 && start.auth.tls && !start.place.local && start.auth.secret.empty() &&
      config.parallel.communicator_secret.empty()) {
    // Nodes reached over TLS alone share no secret: the ranks' own connections (the CPU
    // platform's TCP collectives) prove a fresh one, sent to the nodes only over the TLS links.
    auto fresh = crypto::random_hex(32);
    if (!fresh.ok()) return fresh.status();
    config.parallel.communicator_secret = *fresh;
    TROUPE_LOG_INFO("the ranks' own connections prove a fresh world secret, sent to the nodes over TLS");
  }
  if (world > 1 && config.parallel.communicator_id.empty()) {
    // Made by rank 0's node, where rank 0's communicator will run.
    auto id = make_communicator_id(system, out->layout, config.parallel, config.device, start.timeout);
    if (!id) return id.status();
    config.parallel.communicator_id = *id;
  }
  std::vector<WorkerInitReply> replies;
  auto started = start_workers(system, out->layout, config, &replies, start.timeout);
  if (!started) return started.status();
  out->workers = std::move(started).value();
  out->first_reply = replies.front();
  BlockingRankExecutor ranks(system, rank_group(out->layout, out->workers, start.timeout));
  auto plan = engine::set_up_kv_cache(ranks, config, out->first_reply.info.context_length);
  if (!plan) return plan.status();
  out->kv_plan = *plan;
  out->kv_plan.sliding_window = out->first_reply.info.sliding_window;
  return {};
}

}  // namespace

Result<std::vector<ReplicaPlace>> place_replicas(int data_parallel_size, int local_replicas, int world,
                                                 const std::vector<std::string>& local_nodes,
                                                 const std::vector<std::string>& remote_nodes) {
  const int dp = data_parallel_size;
  if (dp < 1) return invalid_argument("--data-parallel-size must be at least 1, not " + std::to_string(dp));
  if (local_replicas < 0 || local_replicas > dp)
    return invalid_argument("--data-parallel-size-local " + std::to_string(local_replicas) + " must be in 0.." +
                            std::to_string(dp) + " (--data-parallel-size)");
  const int remote = dp - local_replicas;
  if (remote == 0 && !remote_nodes.empty())
    return invalid_argument("--nodes lists " + std::to_string(remote_nodes.size()) + " node(s) but all " +
                            std::to_string(dp) + " replica(s) run on this host (--data-parallel-size-local " +
                            std::to_string(local_replicas) + ")");
  if (remote > 0 && (remote_nodes.empty() || remote_nodes.size() % static_cast<size_t>(remote) != 0))
    return invalid_argument("--nodes lists " + std::to_string(remote_nodes.size()) + " node(s) for " +
                            std::to_string(remote) +
                            " replica(s) off this host: give each the same number of nodes (a multiple of " +
                            std::to_string(remote) + "), or run more on this host with --data-parallel-size-local");
  std::vector<ReplicaPlace> out(static_cast<size_t>(dp));
  for (int r = 0; r < local_replicas; ++r) {
    auto& p = out[static_cast<size_t>(r)];
    p.local = !local_nodes.empty();
    const auto first = static_cast<size_t>(r) * static_cast<size_t>(world);
    for (size_t i = first; i < first + static_cast<size_t>(world) && i < local_nodes.size(); ++i)
      p.nodes.push_back(local_nodes[i]);
  }
  const size_t per_remote = remote > 0 ? remote_nodes.size() / static_cast<size_t>(remote) : 0;
  for (int r = local_replicas; r < dp; ++r) {
    const auto first = static_cast<size_t>(r - local_replicas) * per_remote;
    out[static_cast<size_t>(r)].nodes.assign(remote_nodes.begin() + static_cast<std::ptrdiff_t>(first),
                                             remote_nodes.begin() + static_cast<std::ptrdiff_t>(first + per_remote));
  }
  return out;
}

std::vector<std::string> ReplicaRanks::rank_places(int data_parallel_size) const {
  std::vector<std::string> out = layout.places();
  if (data_parallel_size <= 1) return out;
  for (auto& p : out) p = "replica " + std::to_string(index) + (p.empty() ? "" : ", " + p);
  return out;
}

Result<ReplicaRanks> start_replica(caf::actor_system& system, ReplicaStart start, int data_parallel_size) {
  ReplicaRanks out;
  out.index = start.index;
  out.place = start.place;
  out.auth = start.auth;
  Status s = start_ranks(system, start, &out);
  if (!s.ok()) {
    for (auto& w : out.workers) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    return Status(s.code(), replica_prefix(start.index, data_parallel_size) + s.message());
  }
  out.config = std::move(start.config);
  return out;
}

}  // namespace troupe::actors
