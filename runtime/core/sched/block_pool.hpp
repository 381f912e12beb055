// The paged KV cache's block bookkeeping (vLLM v1 block_pool.py semantics):
// metadata only (id, ref count, content hash), never a pointer to memory.
//
// Free blocks sit in an O(1) doubly linked list in LRU order: allocation
// takes from the head, freeing appends to the tail, a cache hit unlinks a
// block from the middle. A free block that holds hashed (cached) content stays
// findable through the hash map until allocation evicts it.
//
// No null block is reserved: ids 0..num_blocks-1 are all usable, and block
// tables are ragged, so nothing needs a padding block.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/core/sched/block_hash.hpp"
#include "runtime/core/sched/kv_events.hpp"
#include "troupe/status.hpp"

namespace troupe::sched {

using BlockId = int32_t;

struct KvBlock {
  BlockId id = 0;
  int32_t ref_cnt = 0;
  std::optional<BlockHash> hash;  // set while the block is in the prefix cache
};

/// What a BlockStored event says about blocks being cached besides their hashes: the
/// request's tokens (all of them, from position 0), the block size and its LoRA id.
struct StoredBlocksSource {
  std::span<const int32_t> tokens;
  int32_t block_size = 0;
  int64_t lora_id = 0;
  int32_t sliding_window = 0;
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_caching);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  /// Blocks with ref_cnt 0 (cached or not): what allocation can use.
  int32_t num_free_blocks() const { return num_free_; }
  /// Fraction of blocks referenced by some request, 0..1.
  double usage() const;
  bool caching_enabled() const { return enable_caching_; }

  /// Takes `n` blocks from the LRU head, evicting their cached content, each
  /// with ref_cnt 1. nullopt (and nothing taken) when fewer than n are free.
  std::optional<std::vector<BlockId>> get_new_blocks(int32_t n);

  /// The cached block holding this content, if any (free or in use).
  std::optional<BlockId> get_cached_block(const BlockHash& hash) const;

  /// A cache hit: each block gains a reference; a free one leaves the free list.
  void touch(std::span<const BlockId> blocks);

  /// Drops one reference from each block; those reaching 0 are appended to the
  /// free list's tail in the given order (first given, first evicted).
  void free_blocks(std::span<const BlockId> ordered_blocks);

  /// Registers blocks[num_cached_blocks, num_full_blocks) under
  /// block_hashes[i]. A block already hashed (a cache hit) is kept; a block
  /// whose content is already cached in another block stays uncached (one
  /// block per hash keeps eviction simple). With events on, each run of
  /// consecutive blocks that entered the cache is one BlockStored (tokens from `source`).
  void cache_full_blocks(std::span<const BlockId> blocks, std::span<const BlockHash> block_hashes,
                         size_t num_cached_blocks, size_t num_full_blocks, const StoredBlocksSource& source = {});

  /// Forgets all cached content. Refused (false) while any block is in use,
  /// as vLLM does, since running requests still rely on their hashes.
  bool reset_prefix_cache();

  /// KV events (kv_events.hpp): off by default; on, every change of the set of cached
  /// hashes is recorded until take_events().
  void set_events_enabled(bool on) { events_on_ = on; }
  bool events_enabled() const { return events_on_; }
  /// The events since the last call, oldest first.
  std::vector<KvEvent> take_events();

  const KvBlock& block(BlockId id) const;
  /// Number of hashes in the prefix cache.
  size_t num_cached_blocks() const { return cached_.size(); }
  /// The free list from head (evicted first) to tail (tests, debugging).
  std::vector<BlockId> free_list() const;
  /// Verifies the pool's invariants (free list vs ref counts vs hash map).
  Status check_invariants() const;

 private:
  void unlink(BlockId id);
  void push_back(BlockId id);
  void evict(BlockId id);

  static constexpr BlockId kNone = -1;
  std::vector<KvBlock> blocks_;
  std::vector<BlockId> prev_;    // free-list links, kNone when absent
  std::vector<BlockId> next_;
  std::vector<uint8_t> in_free_list_;
  BlockId head_ = kNone;
  BlockId tail_ = kNone;
  int32_t num_free_ = 0;
  bool enable_caching_;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> cached_;
  bool events_on_ = false;
  std::vector<KvEvent> events_;
};

}  // namespace troupe::sched
