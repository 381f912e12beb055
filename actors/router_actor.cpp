#include "actors/router_actor.hpp"

#include <caf/all.hpp>

#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct RouterState {
  std::shared_ptr<RouterSetup> setup;
  static inline const char* name = "troupe.router";
};

using Self = dp_router_actor::stateful_pointer<RouterState>;

dp_router_actor::behavior_type router_behavior(Self self, std::shared_ptr<RouterSetup> setup) {
  self->state.setup = std::move(setup);
  return {
      [=](submit_atom, CoreRequest& request) {
        auto& st = *self->state.setup;
        auto chosen = st.router->route(request);
        if (!chosen) return st.outputs->fail(request.request_id, chosen.status());
        self->send((*st.schedulers)[static_cast<size_t>(*chosen)], submit_atom_v, std::move(request));
      },
      [=](abort_atom, const std::string& id) {
        auto& st = *self->state.setup;
        // An id no replica has (finished, refused, never routed) is a no-op, as for one scheduler.
        if (const int32_t r = st.router->replica_of(id); r >= 0)
          self->send((*st.schedulers)[static_cast<size_t>(r)], abort_atom_v, id);
      },
      [=](replica_atom, const ReplicaUpdate& update) {
        auto& router = *self->state.setup->router;
        const bool was = update.replica >= 0 && update.replica < router.num_replicas() &&
                         router.states()[static_cast<size_t>(update.replica)].serving;
        router.update(update);
        if (was && !update.health.ok())
          TROUPE_LOG_WARNING("router: replica {} stopped serving ({}); new requests go to the others",
                             update.replica, update.health.message());
        else if (!was && update.health.ok())
          TROUPE_LOG_INFO("router: replica {} serves again", update.replica);
      },
  };
}

}  // namespace

dp_router_actor spawn_router_actor(caf::actor_system& system, RouterSetup setup) {
  return system.spawn(router_behavior, std::make_shared<RouterSetup>(std::move(setup)));
}

}  // namespace troupe::actors
