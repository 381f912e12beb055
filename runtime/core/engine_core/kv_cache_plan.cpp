#include "runtime/core/engine_core/kv_cache_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "troupe/log.hpp"

namespace troupe::engine {
namespace {
// Pipeline stages hold different numbers of layers; everything else must agree.
bool same_geometry(const KvCacheSpec& a, const KvCacheSpec& b, bool stages) {
  return a.block_size == b.block_size && (stages || a.num_layers == b.num_layers) &&
         a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim && a.dtype == b.dtype;
}
}  // namespace

Result<KvCachePlan> plan_kv_cache(const std::vector<KvSizing>& ranks, const EngineConfig& config,
                                  int64_t model_context_length) {
  if (ranks.empty()) return invalid_argument("no ranks to size a KV cache for");
  KvCachePlan plan;
  plan.spec = ranks.front().spec;
  const bool stages = config.parallel.pipeline_parallel_size > 1;
  // Block ids are shared by every rank, so the rank that holds the fewest blocks decides;
  // with pipeline stages a rank's block is the size of its own layers.
  int64_t blocks = -1, available = 0, per_block = 0;
  // An encoder (no layer keeps keys and values) needs no cache: its blocks are
  // the scheduler's bookkeeping only, enough for max_num_seqs sequences of the model length.
  const bool no_cache = std::all_of(ranks.begin(), ranks.end(), [](const KvSizing& k) {
    return k.spec.num_layers == 0 && k.spec.block_size > 0;
  });
  if (no_cache) {
    int64_t max_len = config.model.max_model_len;
    if (max_len <= 0 || (model_context_length > 0 && max_len > model_context_length))
      max_len = model_context_length > 0 ? model_context_length : 2048;
    const int64_t bs = plan.spec.block_size;
    plan.num_blocks = config.cache.num_gpu_blocks_override > 0
                          ? config.cache.num_gpu_blocks_override
                          : std::max<int64_t>(1, config.scheduler.max_num_seqs) * ((max_len + bs - 1) / bs);
    plan.max_model_len = std::min(max_len, plan.capacity_tokens());
    return plan;
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    const KvCacheSpec& spec = ranks[r].spec;
    if (!same_geometry(spec, plan.spec, stages))
      return internal_error(fmt::format("rank {} reports another KV cache geometry than rank 0", r));
    const int64_t bytes = spec.bytes_per_block();
    if (spec.block_size <= 0 || bytes <= 0)
      return internal_error(fmt::format("invalid KV cache spec of rank {} (block size {}, {} bytes per block)", r,
                                        spec.block_size, bytes));
    const int64_t fits = ranks[r].available_bytes > 0 ? ranks[r].available_bytes / bytes : 0;
    if (blocks < 0 || fits < blocks) {
      blocks = fits;
      available = ranks[r].available_bytes;
      per_block = bytes;
    }
  }
  if (config.cache.num_gpu_blocks_override > 0) {
    plan.num_blocks = config.cache.num_gpu_blocks_override;
  } else {
    plan.num_blocks = blocks;
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
