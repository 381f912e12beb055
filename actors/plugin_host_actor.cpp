#include "actors/plugin_host_actor.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/worker_actor.hpp"
#include "plugin_host/plugin_host.hpp"

namespace troupe::actors {
namespace {

struct PluginHostState {
  Platform* platform = nullptr;
  std::vector<caf::actor> workers;  // kept so their lifetime follows the node's
  static inline const char* name = "troupe.plugin_host";
};

caf::behavior plugin_host_behavior(caf::stateful_actor<PluginHostState>* self) {
  return {
      [=](load_atom) -> caf::result<std::string> {
        auto& host = plugin_host::PluginHost::instance();
        host.load_all();
        auto platform = host.activate_platform();
        if (!platform) return caf::make_error(caf::sec::runtime_error, platform.status().message());
        self->state.platform = *platform;
        return self->state.platform->device_type();
      },
      [=](worker_atom, int32_t rank) -> caf::result<caf::actor> {
        if (!self->state.platform)
          return caf::make_error(caf::sec::runtime_error, "no platform is activated on this node");
        (void)rank;
        auto worker = spawn_worker_actor(self->system(), self->state.platform);
        self->state.workers.push_back(worker);
        return worker;
      },
  };
}

}  // namespace

caf::actor spawn_plugin_host_actor(caf::actor_system& system) { return system.spawn(plugin_host_behavior); }

}  // namespace troupe::actors
