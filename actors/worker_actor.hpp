// The worker actor: a mailbox around one engine::Rank (the platform's Worker,
// the model file, and sampling on the driver rank), which runs every
// all-ranks command (runtime/protocol/rank_command.hpp). It is
// spawned detached (its own thread), so model steps never occupy CAF's
// scheduler threads. Interface: actors/messages.hpp, worker_actor.
#pragma once

#include <caf/fwd.hpp>

#include "actors/messages.hpp"
#include "troupe/platform.hpp"

namespace troupe::actors {

/// Spawn the worker actor of `rank` for `platform` (which must outlive it).
worker_actor spawn_worker_actor(caf::actor_system& system, const Platform* platform, int32_t rank);

}  // namespace troupe::actors
