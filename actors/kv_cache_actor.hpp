// The kv_cache actor: sizes the paged KV cache through the Worker contract
// (get_kv_cache_spec + determine_available_memory on every rank → the number
// of blocks all ranks can hold), logs it as vLLM does, and has every worker
// allocate it. Block bookkeeping (the pool, prefix cache) lives with the
// scheduling policy, which needs it synchronously inside each schedule().
//   (size_kv_atom, std::vector<caf::actor> workers, EngineConfig) -> KvCacheConfig-like reply
//     as (KvCacheSpec, int64_t num_blocks)
#pragma once

#include <caf/fwd.hpp>

#include <cstdint>

#include "troupe/attention.hpp"
#include "troupe/config.hpp"

namespace troupe::actors {

caf::actor spawn_kv_cache_actor(caf::actor_system& system);

/// Blocks that fit `available_bytes`, honouring the config's override; 0 when none fit.
int64_t blocks_for(const KvCacheSpec& spec, int64_t available_bytes, const EngineConfig& config);

}  // namespace troupe::actors
