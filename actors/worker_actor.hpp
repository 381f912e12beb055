// The worker actor: a mailbox around one rank's engine::WorkerRunner (the
// platform's Worker, the model file, and sampling on the driver rank). It is
// spawned detached (its own thread), so model steps never occupy CAF's
// scheduler threads. Interface: actors/messages.hpp, worker_actor.
#pragma once

#include <caf/fwd.hpp>

#include "actors/messages.hpp"
#include "troupe/platform.hpp"

namespace troupe::actors {

/// Spawn a worker actor for `platform` (which must outlive it).
worker_actor spawn_worker_actor(caf::actor_system& system, const Platform* platform);

}  // namespace troupe::actors
