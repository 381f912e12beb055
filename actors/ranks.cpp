#include "actors/ranks.hpp"

#include <caf/all.hpp>

#include <cstdlib>
#include <set>

#include "actors/gate_actor.hpp"
#include "actors/status_error.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

std::string rank_name(const RankLayout& layout, size_t rank) {
  std::string place = layout.place(rank);
  return "rank " + std::to_string(rank) + (place.empty() ? "" : " (" + place + ")");
}

}  // namespace

std::vector<std::string> RankLayout::places() const {
  std::vector<std::string> out;
  for (size_t r = 0; r < node_of_rank.size(); ++r) out.push_back(place(r));
  return out;
}

std::vector<size_t> place_ranks(int world, size_t num_nodes) {
  std::vector<size_t> out;
  for (int r = 0; r < world; ++r) out.push_back(static_cast<size_t>(r) * num_nodes / static_cast<size_t>(world));
  return out;
}

Result<bool> communicator_across_hosts(const RankLayout& layout) {
  const char* env = std::getenv("TROUPE_CPU_COMM");
  const std::string mode = env ? env : "";
  if (mode == "tcp") return true;
  if (mode == "shm") return false;
  if (!mode.empty() && mode != "auto")
    return invalid_argument("TROUPE_CPU_COMM must be tcp (across hosts, even on one), shm (one host) or auto, not '" +
                            mode + "'");
  std::set<std::string> hosts;
  for (size_t node : layout.node_of_rank) {
    const std::string& address = node < layout.node_addresses.size() ? layout.node_addresses[node] : "";
    std::string host;
    uint16_t port = 0;
    if (address.empty() || !parse_host_port(address, "node", &host, &port).ok()) host = address;
    hosts.insert(host);
  }
  return hosts.size() > 1;
}

Result<std::string> make_communicator_id(caf::actor_system& system, const RankLayout& layout,
                                         ParallelConfig parallel, const std::string& device,
                                         std::chrono::milliseconds timeout) {
  if (layout.node_of_rank.empty() || layout.node_of_rank[0] >= layout.nodes.size())
    return internal_error("a communicator id for a layout without ranks");
  const size_t node = layout.node_of_rank[0];
  auto across = communicator_across_hosts(layout);
  if (!across) return across.status();
  parallel.communicator_host.clear();
  if (*across) {
    const std::string address = node < layout.node_addresses.size() ? layout.node_addresses[node] : "";
    uint16_t port = 0;
    if (address.empty() || !parse_host_port(address, "node", &parallel.communicator_host, &port).ok())
      parallel.communicator_host = "127.0.0.1";  // rank 0 runs in this process
  }
  caf::scoped_actor self{system};
  Result<std::string> out = internal_error("no answer");
  self->request(layout.nodes[node], timeout, comm_id_atom_v, parallel, device)
      .receive([&](std::string& id) { out = std::move(id); },
               [&](caf::error& e) { out = to_status(e, "making the communicator on " + rank_name(layout, 0)); });
  if (out.ok()) {
    const char* env = std::getenv("TROUPE_CPU_COMM");
    const bool forced = env && (std::string(env) == "tcp" || std::string(env) == "shm");
    TROUPE_LOG_INFO("ranks meet through communicator {} ({})", *out,
                    forced ? std::string("TROUPE_CPU_COMM=") + env
                           : std::string(*across ? "nodes on several hosts" : "nodes on one host"));
  }
  return out;
}

RankGroup rank_group(const RankLayout& layout, std::vector<worker_actor> workers, std::chrono::milliseconds timeout) {
  return RankGroup{std::move(workers), layout.places(), timeout};
}

Result<std::vector<worker_actor>> start_workers(caf::actor_system& system, const RankLayout& layout,
                                                const EngineConfig& config, std::vector<WorkerInitReply>* replies,
                                                std::chrono::milliseconds timeout) {
  caf::scoped_actor self{system};
  const size_t world = layout.node_of_rank.size();
  std::vector<worker_actor> workers;
  auto stop_started = [&] {
    for (auto& w : workers) self->send_exit(w, caf::exit_reason::user_shutdown);
  };
  // Spawning is quick: one rank after another.
  for (size_t r = 0; r < world; ++r) {
    Status failed;
    self->request(layout.nodes[layout.node_of_rank[r]], timeout, worker_atom_v, static_cast<int32_t>(r), config.device)
        .receive([&](worker_actor& w) { workers.push_back(std::move(w)); },
                 [&](caf::error& err) { failed = to_status(err, "starting the worker of " + rank_name(layout, r)); });
    if (!failed.ok()) {
      stop_started();
      return failed;
    }
  }
  BlockingRankExecutor ranks(system, rank_group(layout, workers, timeout));
  auto loaded = ranks.run_on_all(engine::LoadModel{config});
  if (!loaded) {
    stop_started();
    return loaded.status();
  }
  if (replies) *replies = std::move(loaded).value();
  return workers;
}

}  // namespace troupe::actors
