// Per-request KV block tables on top of the BlockPool (vLLM v1
// kv_cache_manager.py semantics): prefix-cache lookup, slot allocation for a
// step's tokens, caching of newly full blocks, and freeing.
//
// Sliding window (a model whose EVERY layer sees only its last `sliding_window` keys,
// Mistral 7B v0.1; a model with any global layer gives 0 here and keeps every block):
// before a step, the blocks that lie wholly before the window of the step's first query
// (position num_computed: keys from num_computed - window + 1 on) are released to the
// pool, last first, as vLLM's SlidingWindowManager does (remove_skipped_blocks). Windows
// only move forward (num_computed never decreases while a request holds blocks: rejected
// drafts roll back only the tokens of the step), so a released block is never needed again.
// Its table entry is pointed at the request's first held block, so a step's block table
// holds valid ids only (attention reads nothing before the window: that entry is never
// used). A released block keeps its content and its prefix-cache hash until allocation
// evicts it, exactly like a finished request's blocks: a later request may still hit it,
// and the hit is valid (a full block's keys and values depend only on the tokens up to its
// end), while an evicted block has lost its hash and cannot be matched. Prefix lookup stays
// the chained one (every block from the first), so a hit never needs a released block's
// content to be anything but what its hash says.
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
  /// > 0: every layer's window (ModelInfo::sliding_window); blocks out of it are released.
  int32_t sliding_window = 0;
  /// Record KV events (kv_events.hpp) for take_kv_events(): a router or a publisher reads them.
  bool kv_events = false;
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
  /// then nothing changed, but for blocks out of the sliding window released first).
  std::optional<std::vector<BlockId>> allocate_slots(Request& request, int64_t num_new_tokens,
                                                     int64_t num_new_computed_tokens = 0,
                                                     const std::vector<BlockId>& computed_blocks = {});

  /// Releases every block of the request at once (finish, abort, preemption).
  /// Tail blocks are evicted first, as they are the least likely to be shared.
  void free(const std::string& request_id);

  /// The request's blocks in sequence order (empty when it holds none). With a sliding
  /// window, the entries of released blocks name the first block still held.
  const std::vector<BlockId>& block_table(const std::string& request_id) const;
  /// Blocks the request holds: its table less the blocks released out of the window.
  int64_t num_held_blocks(const std::string& request_id) const;
  double usage() const { return pool_.usage(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }

  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  /// The counters so far, then zero (per-step reporting).
  PrefixCacheStats take_prefix_cache_stats();
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }
  /// The KV events since the last call (none unless KvCacheConfig::kv_events).
  std::vector<KvEvent> take_kv_events() { return pool_.take_events(); }

  const BlockPool& pool() const { return pool_; }
  size_t num_requests_with_blocks() const { return tables_.size(); }

 private:
  void update_block_hashes(Request& request) const;
  /// Releases the blocks of `table` wholly before the window of a query at position
  /// num_computed (keeping at least one), and points their entries at the first held block.
  void release_out_of_window(const std::string& request_id, std::vector<BlockId>& table, int64_t num_computed);

  KvCacheConfig config_;
  bool caching_;
  BlockPool pool_;
  std::unordered_map<std::string, std::vector<BlockId>> tables_;
  std::unordered_map<std::string, size_t> num_cached_blocks_;  // blocks already offered to the cache
  std::unordered_map<std::string, size_t> num_released_;       // leading blocks released out of the window
  PrefixCacheStats stats_;
};

}  // namespace troupe::sched
