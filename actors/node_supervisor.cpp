#include "actors/node_supervisor.hpp"

#include <caf/all.hpp>

#include <set>

#include "actors/gate_actor.hpp"
#include "actors/status_error.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct SupervisorState {
  NodeSupervisorSetup setup;
  std::set<size_t> lost;        // nodes whose connection is gone
  bool rebuild = false;         // every node answers again, but the ranks are not rebuilt yet
  bool tick_pending = false;
  static inline const char* name = "troupe.node_supervisor";
};

using Self = node_supervisor_actor::stateful_pointer<SupervisorState>;

void schedule_tick(Self self) {
  if (self->state.tick_pending) return;
  self->state.tick_pending = true;
  self->delayed_send(self, self->state.setup.retry_interval, tick_atom_v);
}

std::string ranks_of(const RankLayout& layout, size_t node) {
  std::string out;
  for (size_t r = 0; r < layout.node_of_rank.size(); ++r)
    if (layout.node_of_rank[r] == node) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

/// Reconnects the lost nodes it can; when none is lost, rebuilds the ranks.
void retry(Self self) {
  auto& st = self->state;
  auto& setup = st.setup;
  for (auto it = st.lost.begin(); it != st.lost.end();) {
    std::string host;
    uint16_t port = 0;
    (void)parse_host_port(setup.addresses[*it], "node", &host, &port);
    auto node = connect_node(self->system(), host, port, setup.auth, setup.connect_timeout);
    if (!node) {
      ++it;
      continue;
    }
    TROUPE_LOG_INFO("reconnected to node {}", setup.addresses[*it]);
    setup.layout.nodes[*it] = *node;
    self->monitor(*node);
    it = st.lost.erase(it);
  }
  if (!st.lost.empty()) return schedule_tick(self);
  if (!st.rebuild) return;
  TROUPE_LOG_INFO("rebuilding {} rank(s) on their nodes", setup.layout.node_of_rank.size());
  if (setup.config.parallel.world_size() > 1) {
    // A world's id serves it once: a fresh one, from rank 0's node as it is now.
    auto id = make_communicator_id(self->system(), setup.layout, setup.config.parallel, setup.config.device,
                                   setup.rank_timeout);
    if (!id) {
      TROUPE_LOG_ERROR("rebuilding the ranks failed, retrying: {}", id.status().message());
      return schedule_tick(self);
    }
    setup.config.parallel.communicator_id = *id;
  }
  std::vector<WorkerInitReply> replies;
  auto workers = start_workers(self->system(), setup.layout, setup.config, &replies, setup.rank_timeout);
  Status status = workers.status();
  if (workers) {
    // The same path as at start-up, keeping the plan the engine's core runs with.
    BlockingRankExecutor ranks(self->system(), rank_group(setup.layout, *workers, setup.rank_timeout));
    status = engine::set_up_kv_cache(ranks, setup.config, replies.front().info.context_length, {&setup.plan})
                 .status();
  }
  if (!status.ok()) {
    TROUPE_LOG_ERROR("rebuilding the ranks failed, retrying: {}", status.message());
    return schedule_tick(self);
  }
  bool reset = false;
  caf::scoped_actor waiter{self->system()};
  waiter->request(setup.scheduler, setup.rank_timeout, reset_atom_v, *workers)
      .receive([&](bool) { reset = true; },
               [&](caf::error& e) { TROUPE_LOG_ERROR("{}", to_status(e, "resetting the scheduler").message()); });
  if (!reset) return schedule_tick(self);
  st.rebuild = false;
  if (setup.on_rebuilt) setup.on_rebuilt(*workers);
}

node_supervisor_actor::behavior_type supervisor_behavior(Self self, std::shared_ptr<NodeSupervisorSetup> setup) {
  auto& st = self->state;
  st.setup = std::move(*setup);
  for (auto& node : st.setup.layout.nodes) self->monitor(node);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t i = 0; i < st.setup.layout.nodes.size(); ++i) {
      if (st.setup.layout.nodes[i].address() != dm.source || st.lost.count(i)) continue;
      TROUPE_LOG_ERROR("lost node {} (rank(s) {}): {}; reconnecting every {} ms", st.setup.addresses[i],
                       ranks_of(st.setup.layout, i), self->system().render(dm.reason),
                       st.setup.retry_interval.count());
      st.lost.insert(i);
      st.rebuild = true;
      schedule_tick(self);
    }
  });
  return {
      [=](tick_atom) {
        self->state.tick_pending = false;
        retry(self);
      },
  };
}

}  // namespace

node_supervisor_actor spawn_node_supervisor(caf::actor_system& system, NodeSupervisorSetup setup) {
  return system.spawn<caf::detached>(supervisor_behavior, std::make_shared<NodeSupervisorSetup>(std::move(setup)));
}

}  // namespace troupe::actors
