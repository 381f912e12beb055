// The plugin-host actor: one per node. Loads the node's plugins once,
// activates its platform and spawns worker actors there, so a head process
// can place workers on remote nodes through the same messages.
//   (load_atom)                 -> std::string  activated platform (device_type)
//   (worker_atom, int32_t rank) -> caf::actor   a new worker actor on this node
#pragma once

#include <caf/fwd.hpp>

namespace troupe::actors {

caf::actor spawn_plugin_host_actor(caf::actor_system& system);

}  // namespace troupe::actors
