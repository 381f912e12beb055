// The engine's CAF side, for programs that talk to its actors themselves:
// preparing an actor system of their own for an engine, and the handles of
// the stat logger (actor subscribers of StatsEvent) and the worker actors. The plain C++ API (actors/engine.hpp) needs none of it.
#pragma once

#include <vector>

#include "actors/engine.hpp"
#include "actors/messages.hpp"

namespace troupe::engine {

/// Prepare a caf::actor_system_config for an engine in your own actor system:
/// registers troupe's message types and loads CAF's middleman (remote actors).
void configure_actor_system(caf::actor_system_config& config);

/// Subscribers: a stats_subscriber_actor (local or remote) receives every StatsEvent after
/// `send(stat_logger(engine), actors::subscribe_atom_v, actor)`.
actors::stat_logger_actor stat_logger(const Engine& engine);
/// The worker actors, in rank order (for supervision tools and tests).
std::vector<actors::worker_actor> worker_actors(const Engine& engine);

}  // namespace troupe::engine
