#include "runtime/core/engine_core/kv_cache_setup.hpp"

#include <algorithm>
#include <string>

namespace troupe::engine {

Result<KvCachePlan> set_up_kv_cache(Executor& ranks, const EngineConfig& config, int64_t model_context_length,
                                    const KvCacheSetup& setup) {
  auto sizes = ranks.run_on_all(SizeKvCache{});
  if (!sizes) return sizes.status();
  auto plan = plan_kv_cache(*sizes, config, model_context_length);
  if (!plan) return plan.status();
  if (setup.keep) {
    if (plan->num_blocks < setup.keep->num_blocks)
      return resource_exhausted("the rebuilt ranks can hold " + std::to_string(plan->num_blocks) +
                                " KV cache blocks, fewer than the " + std::to_string(setup.keep->num_blocks) +
                                " the engine runs with");
    plan = *setup.keep;
  } else {
    const int64_t bs = plan->spec.block_size;
    if (setup.one_sequence) plan->num_blocks = std::min(plan->num_blocks, (plan->max_model_len + bs - 1) / bs);
    if (!setup.one_sequence) log_kv_cache_plan(*plan);
  }
  auto allocated = ranks.run_on_all(AllocateKvCache{plan->spec, plan->num_blocks});
  if (!allocated) return allocated.status();
  auto warm = ranks.run_on_all(WarmUp{});
  if (!warm) return warm.status();
  return plan;
}

}  // namespace troupe::engine
