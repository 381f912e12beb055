// KV cache events (vLLM's kv_events: BlockStored, BlockRemoved, AllBlocksCleared):
// what the prefix cache gained and lost, in order, as the block pool changes. A hash
// is "stored" when it enters the pool's hash map and "removed" when it leaves it
// (eviction), so replaying the events gives exactly the set of hashes a lookup can
// hit. The engine's router keeps one such set per replica; the ZMQ publisher
// (runtime/core/kv_events) sends them to external routers in vLLM's wire format.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "runtime/core/sched/block_hash.hpp"

namespace troupe::sched {

/// Blocks that entered the prefix cache: consecutive blocks of one request's chain.
struct BlockStored {
  std::vector<BlockHash> block_hashes;
  std::optional<BlockHash> parent_block_hash;  // the chain's block before the first; none for block 0
  std::vector<int32_t> token_ids;              // block_size tokens per block, in order
  int32_t block_size = 0;
  int64_t lora_id = 0;                         // 0: the base model
  int32_t sliding_window = 0;                  // > 0: every layer's attention window (the cache's spec)
};

/// Blocks whose content left the prefix cache (evicted to hold other tokens).
struct BlockRemoved {
  std::vector<BlockHash> block_hashes;
};

/// The whole prefix cache was forgotten (reset, sleep, prefix caching turned off).
struct AllBlocksCleared {};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

/// Applies `events` to a set of cached hashes (a replica's, as a router keeps it).
template <class Set>
void apply_kv_events(const std::vector<KvEvent>& events, Set& cached) {
  for (const KvEvent& e : events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      for (const BlockHash& h : s->block_hashes) cached.insert(h);
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      for (const BlockHash& h : r->block_hashes) cached.erase(h);
    } else {
      cached.clear();
    }
  }
}

}  // namespace troupe::sched
