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

/// Sends one request per index first, then collects every answer: the first
/// failure wins, but every answer is waited for (bounded by the timeout).
template <class T, class Send, class OnValue>
Status fan_out(size_t n, Send send, OnValue on_value,
               const std::function<std::string(size_t)>& what) {
  using Handle = decltype(send(size_t{0}));
  std::vector<Handle> handles;
  handles.reserve(n);
  for (size_t i = 0; i < n; ++i) handles.push_back(send(i));
  Status first;
  for (size_t i = 0; i < n; ++i)
    handles[i].receive([&](T& value) { on_value(i, value); },
                       [&](caf::error& err) {
                         if (first.ok()) first = to_status(err, what(i));
                       });
  return first;
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

Result<std::vector<worker_actor>> start_workers(caf::actor_system& system, const RankLayout& layout,
                                                const EngineConfig& config, std::vector<WorkerInitReply>* replies,
                                                std::chrono::milliseconds timeout) {
  caf::scoped_actor self{system};
  const size_t world = layout.node_of_rank.size();
  std::vector<worker_actor> workers(world);
  auto what = [&](size_t r) { return "starting the worker of " + rank_name(layout, r); };
  TROUPE_RETURN_IF_ERROR(fan_out<worker_actor>(
      world,
      [&](size_t r) {
        return self->request(layout.nodes[layout.node_of_rank[r]], timeout, worker_atom_v, static_cast<int32_t>(r),
                             config.device);
      },
      [&](size_t r, worker_actor& w) { workers[r] = std::move(w); }, what));
  if (replies) replies->assign(world, WorkerInitReply{});
  auto loading = [&](size_t r) { return "loading the model on " + rank_name(layout, r); };
  Status loaded = fan_out<WorkerInitReply>(
      world,
      [&](size_t r) { return self->request(workers[r], timeout, init_atom_v, config, static_cast<int32_t>(r)); },
      [&](size_t r, WorkerInitReply& reply) {
        if (replies) (*replies)[r] = std::move(reply);
      },
      loading);
  if (!loaded.ok()) {
    for (auto& w : workers) self->send_exit(w, caf::exit_reason::user_shutdown);
    return loaded;
  }
  return workers;
}

Status allocate_kv_cache(caf::actor_system& system, const std::vector<worker_actor>& workers,
                         const RankLayout& layout, const KvCachePlan& plan, std::chrono::milliseconds timeout) {
  caf::scoped_actor self{system};
  return fan_out<bool>(
      workers.size(),
      [&](size_t r) { return self->request(workers[r], timeout, init_kv_atom_v, plan.spec, plan.num_blocks); },
      [](size_t, bool&) {}, [&](size_t r) { return "allocating the KV cache on " + rank_name(layout, r); });
}

Status warm_up(caf::actor_system& system, const std::vector<worker_actor>& workers, const RankLayout& layout,
               std::chrono::milliseconds timeout) {
  caf::scoped_actor self{system};
  return fan_out<bool>(
      workers.size(), [&](size_t r) { return self->request(workers[r], timeout, warmup_atom_v); },
      [](size_t, bool&) {}, [&](size_t r) { return "warming up " + rank_name(layout, r); });
}

}  // namespace troupe::actors
