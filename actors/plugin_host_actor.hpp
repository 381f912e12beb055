// The plugin-host actor: one per node. Loads the node's plugins once,
// activates its platform and spawns worker actors there, so a head process
// can place workers on remote nodes through the same messages.
// Interface: actors/messages.hpp, plugin_host_actor.
#pragma once

#include <caf/fwd.hpp>

#include "actors/messages.hpp"

namespace troupe::actors {

plugin_host_actor spawn_plugin_host_actor(caf::actor_system& system);

}  // namespace troupe::actors
