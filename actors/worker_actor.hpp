// The worker actor: hosts the activated platform's Worker for one rank. It is
// spawned detached (its own thread), so model steps never occupy CAF's
// scheduler threads. Rank 0 also samples, next to the logits.
#pragma once

#include <caf/fwd.hpp>

#include "troupe/platform.hpp"

namespace troupe::actors {

/// Spawn a worker actor for `platform` (which must outlive it).
caf::actor spawn_worker_actor(caf::actor_system& system, Platform* platform);

}  // namespace troupe::actors
