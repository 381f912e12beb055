// The node supervisor: watches the nodes that host an engine's ranks. When a
// node is lost (killed: its connection drops; stopped: the middleman's
// heartbeats time out), the scheduler has already failed the requests in
// flight and the engine reports unhealthy; the supervisor then tries to reach
// the node again at the same address, every retry interval. Once every node
// answers, it rebuilds all ranks (new workers, model, KV cache, warm-up) and
// resets the scheduler onto them, so the engine serves again without a restart.
// Detached: reconnecting and rebuilding block its own thread only.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/ranks.hpp"
#include "net/link_guard.hpp"
#include "runtime/config/engine_config.hpp"

namespace troupe::actors {

struct NodeSupervisorSetup {
  std::vector<std::string> addresses;   // "HOST:PORT" of each node of layout.nodes
  net::LinkAuth auth;                   // the nodes' secret and TLS, as at start
  RankLayout layout;
  EngineConfig config;
  KvCachePlan plan;
  scheduler_actor scheduler;
  /// Called (on the supervisor's thread) with the new workers after a rebuild.
  std::function<void(const std::vector<worker_actor>&)> on_rebuilt;
  std::chrono::milliseconds retry_interval = std::chrono::seconds(1);
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(3);
  std::chrono::milliseconds rank_timeout = std::chrono::minutes(5);
};

using node_supervisor_actor = caf::typed_actor<caf::reacts_to<tick_atom>>;

node_supervisor_actor spawn_node_supervisor(caf::actor_system& system, NodeSupervisorSetup setup);

}  // namespace troupe::actors
