// The plugin-host actor: one per node. Loads the node's plugins once,
// activates its platform and spawns worker actors there, so a head process
// can place workers on remote nodes through the same messages.
// Interface: actors/messages.hpp, plugin_host_actor.
#pragma once

#include <caf/fwd.hpp>

#include <string>

#include "actors/messages.hpp"

namespace troupe::actors {

/// `node_host`: the address `troupe node --host` listens on ("" in a head's own process):
/// where rank 0 listens when a communicator across hosts is asked of this node.
plugin_host_actor spawn_plugin_host_actor(caf::actor_system& system, std::string node_host = "");

}  // namespace troupe::actors
