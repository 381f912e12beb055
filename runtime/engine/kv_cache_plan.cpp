#include "runtime/engine/kv_cache_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "troupe/log.hpp"

namespace troupe::engine {
namespace {
bool same_geometry(const KvCacheSpec& a, const KvCacheSpec& b) {
  return a.block_size == b.block_size && a.num_layers == b.num_layers && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.dtype == b.dtype;
}
}  // namespace

Result<KvCachePlan> plan_kv_cache(const std::vector<KvSizing>& ranks, const EngineConfig& config,
                                  int64_t model_context_length) {
  if (ranks.empty()) return invalid_argument("no ranks to size a KV cache for");
  KvCachePlan plan;
  plan.spec = ranks.front().spec;
  int64_t available = ranks.front().available_bytes;
  for (size_t r = 1; r < ranks.size(); ++r) {
    if (!same_geometry(ranks[r].spec, plan.spec))
      return internal_error(fmt::format("rank {} reports another KV cache geometry than rank 0", r));
    available = std::min(available, ranks[r].available_bytes);
  }
  const int64_t per_block = plan.spec.bytes_per_block();
  if (plan.spec.block_size <= 0 || per_block <= 0)
    return internal_error(fmt::format("invalid KV cache spec (block size {}, {} bytes per block)",
                                      plan.spec.block_size, per_block));
  if (config.cache.num_gpu_blocks_override > 0) {
    plan.num_blocks = config.cache.num_gpu_blocks_override;
  } else {
    plan.num_blocks = available > 0 ? available / per_block : 0;
    if (plan.num_blocks < 1)
      return resource_exhausted(fmt::format(
          "not enough memory for the KV cache: {} bytes available, one block needs {} bytes "
          "(raise TROUPE_CPU_KVCACHE_SPACE, kv_cache_memory_bytes or the memory utilization)",
          std::max<int64_t>(available, 0), per_block));
  }
  int64_t max_len = config.model.max_model_len;
  if (max_len <= 0) max_len = model_context_length > 0 ? model_context_length : 2048;
  if (model_context_length > 0) max_len = std::min(max_len, model_context_length);
  if (max_len > plan.capacity_tokens()) {
    TROUPE_LOG_WARNING("max_model_len {} exceeds the KV cache ({} tokens); limiting it", max_len,
                       plan.capacity_tokens());
    max_len = plan.capacity_tokens();
  }
  plan.max_model_len = max_len;
  return plan;
}

void log_kv_cache_plan(const KvCachePlan& plan) {
  const int64_t tokens = plan.capacity_tokens();
  TROUPE_LOG_INFO("KV cache size: {} tokens ({} blocks of {} tokens, {:.2f} GiB)", tokens, plan.num_blocks,
                  plan.spec.block_size,
                  static_cast<double>(plan.num_blocks * plan.spec.bytes_per_block()) / (1 << 30));
  if (plan.max_model_len > 0)
    TROUPE_LOG_INFO("Maximum concurrency for {} tokens per request: {:.2f}x", plan.max_model_len,
                    static_cast<double>(tokens) / static_cast<double>(plan.max_model_len));
}

}  // namespace troupe::engine
