// Per-request KV block tables on top of the BlockPool (vLLM v1
// kv_cache_manager.py semantics): prefix-cache lookup, slot allocation for a
// step's tokens, caching of newly full blocks, and freeing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/core/sched/block_pool.hpp"
#include "runtime/core/sched/request.hpp"

namespace troupe::sched {

struct KvCacheConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;            // tokens per block
  bool enable_prefix_caching = true;
};

/// The cached prefix found for a request: blocks to reuse and the tokens they hold.
struct ComputedBlocks {
  std::vector<BlockId> blocks;
  int64_t num_tokens = 0;
};

/// Prefix-cache counters in tokens, cumulative since construction or the last take.
struct PrefixCacheStats {
  int64_t queries = 0;   // tokens looked up
  int64_t hits = 0;      // of those, tokens found cached
  int64_t requests = 0;  // lookups made
};

class KvCacheManager {
 public:
  explicit KvCacheManager(KvCacheConfig config);

  int32_t block_size() const { return config_.block_size; }
  int32_t num_blocks() const { return config_.num_blocks; }
  /// Tokens the whole cache can hold.
  int64_t capacity_tokens() const { return int64_t{config_.num_blocks} * config_.block_size; }
  bool prefix_caching_enabled() const { return caching_; }
  /// Turning it off also drops cached content (when no block is in use).
  void set_prefix_caching(bool enabled);

  /// The longest cached prefix of the request's known tokens, in full blocks.
  /// Never the whole sequence: at least the last token is left to compute so
  /// the step produces logits. Empty when caching is off.
  ComputedBlocks get_computed_blocks(Request& request);

  /// Makes room for `num_new_tokens` more tokens after the request's computed
  /// ones plus `num_new_computed_tokens` found in the cache (`computed_blocks`,
  /// only for a request holding no blocks yet). Newly full blocks are cached.
  /// Returns the newly allocated blocks, or nullopt when there is no room (and
  /// then nothing changed).
  std::optional<std::vector<BlockId>> allocate_slots(Request& request, int64_t num_new_tokens,
                                                     int64_t num_new_computed_tokens = 0,
                                                     const std::vector<BlockId>& computed_blocks = {});

  /// Releases every block of the request at once (finish, abort, preemption).
  /// Tail blocks are evicted first, as they are the least likely to be shared.
  void free(const std::string& request_id);

  /// The request's blocks in sequence order (empty when it holds none).
  const std::vector<BlockId>& block_table(const std::string& request_id) const;
  double usage() const { return pool_.usage(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }

  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  /// The counters so far, then zero (per-step reporting).
  PrefixCacheStats take_prefix_cache_stats();
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }

  const BlockPool& pool() const { return pool_; }
  size_t num_requests_with_blocks() const { return tables_.size(); }

 private:
  void update_block_hashes(Request& request) const;

  KvCacheConfig config_;
  bool caching_;
  BlockPool pool_;
  std::unordered_map<std::string, std::vector<BlockId>> tables_;
  std::unordered_map<std::string, size_t> num_cached_blocks_;  // blocks already offered to the cache
  PrefixCacheStats stats_;
};

}  // namespace troupe::sched
