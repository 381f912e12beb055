// The router actor: the head's one mailbox in front of data parallel replicas. A
// request goes to the replica engine::DpRouter picks (the routing policy over each
// replica's prefix cache, as its own KV events tell it, and load) or the one it pins;
// an abort goes where its request went. Each replica's scheduler reports to it after
// every output (load, KV events, finished requests, health), so a lost replica is
// routed around as soon as its scheduler hears of the loss. A request it cannot route
// ends through the OutputRouter with the reason. Interface: actors/messages.hpp,
// dp_router_actor.
#pragma once

#include <caf/fwd.hpp>

#include <memory>
#include <vector>

#include "actors/messages.hpp"
#include "runtime/core/engine_core/output_router.hpp"
#include "runtime/core/routing/dp_router.hpp"

namespace troupe::actors {

struct RouterSetup {
  std::unique_ptr<engine::DpRouter> router;
  /// Replica r's scheduler at [r]. The schedulers are spawned after the router (they report
  /// to it), so the engine fills this before it accepts the first request; the router
  /// reads it only when a request or an abort arrives.
  std::shared_ptr<std::vector<scheduler_actor>> schedulers;
  /// Where a request that cannot be routed ends (its caller's callback).
  std::shared_ptr<engine::OutputRouter> outputs;
};

dp_router_actor spawn_router_actor(caf::actor_system& system, RouterSetup setup);

}  // namespace troupe::actors
