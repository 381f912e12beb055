// The one path that readies the ranks' KV caches, at start-up and when lost
// ranks are rebuilt: every rank reports its needs (SizeKvCache), the engine
// plans the cache (plan_kv_cache), every rank allocates it (AllocateKvCache)
// and warms up (WarmUp), all as collective calls.
#pragma once

#include <cstdint>

#include "runtime/core/engine_core/executor.hpp"
#include "runtime/core/engine_core/kv_cache_plan.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

struct KvCacheSetup {
  /// Rebuilding ranks: the plan the engine already runs with. It is reused, and every
  /// rank must still be able to hold it.
  const KvCachePlan* keep = nullptr;
  /// No more blocks than one sequence of the maximum model length needs (the offline
  /// generator runs one sequence at a time).
  bool one_sequence = false;
};

/// Size, plan, allocate and warm up, on the ranks of `ranks` (loaded models). A serving
/// engine's new plan is logged as vLLM does.
Result<KvCachePlan> set_up_kv_cache(Executor& ranks, const EngineConfig& config, int64_t model_context_length,
                                    const KvCacheSetup& setup = {});

}  // namespace troupe::engine
