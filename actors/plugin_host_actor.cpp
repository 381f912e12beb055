#include "actors/plugin_host_actor.hpp"

#include <caf/all.hpp>

#include "actors/status_error.hpp"
#include "actors/worker_actor.hpp"
#include "plugin_host/plugin_host.hpp"

namespace troupe::actors {
namespace {

struct PluginHostState {
  Platform* platform = nullptr;
  std::vector<worker_actor> workers;  // kept so their lifetime follows the node's
  static inline const char* name = "troupe.plugin_host";
};

plugin_host_actor::behavior_type plugin_host_behavior(plugin_host_actor::stateful_pointer<PluginHostState> self) {
  return {
      [=](load_atom) -> caf::result<std::string> {
        auto& host = plugin_host::PluginHost::instance();
        host.load_all();
        auto platform = host.activate_platform();
        if (!platform) return to_error(platform.status());
        self->state.platform = *platform;
        return self->state.platform->device_type();
      },
      [=](worker_atom, int32_t rank) -> caf::result<worker_actor> {
        if (!self->state.platform) return to_error(unavailable("no platform is activated on this node"));
        if (rank < 0) return to_error(invalid_argument("rank " + std::to_string(rank) + " is negative"));
        auto worker = spawn_worker_actor(self->system(), self->state.platform);
        self->state.workers.push_back(worker);
        return worker;
      },
  };
}

}  // namespace

plugin_host_actor spawn_plugin_host_actor(caf::actor_system& system) { return system.spawn(plugin_host_behavior); }

}  // namespace troupe::actors
