// The kv_cache actor: sizes the paged KV cache through the Worker contract
// (get_kv_cache_spec + determine_available_memory on every rank, then
// engine::plan_kv_cache), logs it as vLLM does, and has every rank allocate
// it. Block bookkeeping (the pool, prefix cache) lives in the EngineCore's
// scheduler, which needs it synchronously inside each schedule().
// Interface: actors/messages.hpp, kv_cache_actor.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>

#include "actors/messages.hpp"

namespace troupe::actors {

/// `rank_timeout` bounds each rank's answer.
kv_cache_actor spawn_kv_cache_actor(caf::actor_system& system,
                                    std::chrono::milliseconds rank_timeout = std::chrono::minutes(2));

}  // namespace troupe::actors
