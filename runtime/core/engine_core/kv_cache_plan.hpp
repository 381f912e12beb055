// Sizing the paged KV cache from what every rank reports: a pure function,
// so the policy is tested without workers or actors.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

struct KvCachePlan {
  KvCacheSpec spec;
  int64_t num_blocks = 0;
  int64_t max_model_len = 0;  // tokens one request may hold (prompt + output)
  int32_t sliding_window = 0; // the model's window on every layer (ModelInfo::sliding_window): the
                              // scheduler releases blocks out of it; set by the caller, not planned
  int64_t capacity_tokens() const { return num_blocks * spec.block_size; }
};

/// Blocks that every rank can hold (the smallest offer wins; the config's
/// num_gpu_blocks_override wins over all), and the maximum model length:
/// config.model.max_model_len, else the model's context length (else 2048),
/// capped by the context length and by what the cache holds.
/// Errors: no ranks, ranks that disagree on the geometry, no room for a block. With
/// pipeline_parallel_size > 1 the ranks may hold different numbers of layers (their stages);
/// the plan's spec is rank 0's, and each rank keeps its own layer count.
Result<KvCachePlan> plan_kv_cache(const std::vector<KvSizing>& ranks, const EngineConfig& config,
                                  int64_t model_context_length);

/// vLLM's start-up lines: "KV cache size: N tokens" and "Maximum concurrency ...".
void log_kv_cache_plan(const KvCachePlan& plan);

}  // namespace troupe::engine
