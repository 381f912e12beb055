#include "runtime/core/sched/block_pool.hpp"

#include <fmt/format.h>

#include "troupe/check.hpp"

namespace troupe::sched {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : blocks_(static_cast<size_t>(num_blocks)),
      prev_(static_cast<size_t>(num_blocks), kNone),
      next_(static_cast<size_t>(num_blocks), kNone),
      in_free_list_(static_cast<size_t>(num_blocks), 0),
      enable_caching_(enable_caching) {
  TROUPE_CHECK(num_blocks > 0, "a block pool needs at least one block");
  for (BlockId i = 0; i < num_blocks; ++i) {
    blocks_[i].id = i;
    push_back(i);
  }
}

double BlockPool::usage() const {
  return 1.0 - static_cast<double>(num_free_) / static_cast<double>(blocks_.size());
}

void BlockPool::unlink(BlockId id) {
  TROUPE_CHECK(in_free_list_[id], "unlinking a block that is not free");
  const BlockId p = prev_[id], n = next_[id];
  if (p != kNone) next_[p] = n; else head_ = n;
  if (n != kNone) prev_[n] = p; else tail_ = p;
  prev_[id] = next_[id] = kNone;
  in_free_list_[id] = 0;
  --num_free_;
}

void BlockPool::push_back(BlockId id) {
  TROUPE_CHECK(!in_free_list_[id], "block already in the free list");
  prev_[id] = tail_;
  next_[id] = kNone;
  if (tail_ != kNone) next_[tail_] = id; else head_ = id;
  tail_ = id;
  in_free_list_[id] = 1;
  ++num_free_;
}

void BlockPool::evict(BlockId id) {
  KvBlock& b = blocks_[id];
  if (!b.hash) return;
  auto it = cached_.find(*b.hash);
  if (it != cached_.end() && it->second == id) {
    cached_.erase(it);
    // vLLM's block pool: one BlockRemoved per evicted block.
    if (events_on_) events_.push_back(BlockRemoved{{*b.hash}});
  }
  b.hash.reset();
}

std::optional<std::vector<BlockId>> BlockPool::get_new_blocks(int32_t n) {
  TROUPE_CHECK(n >= 0, "negative block count");
  if (n > num_free_) return std::nullopt;
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const BlockId id = head_;
    unlink(id);
    evict(id);
    TROUPE_CHECK(blocks_[id].ref_cnt == 0, "free block with references");
    blocks_[id].ref_cnt = 1;
    out.push_back(id);
  }
  return out;
}

std::optional<BlockId> BlockPool::get_cached_block(const BlockHash& hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::touch(std::span<const BlockId> blocks) {
  for (BlockId id : blocks) {
    TROUPE_CHECK(id >= 0 && id < num_blocks(), "block id out of range");
    KvBlock& b = blocks_[id];
    if (b.ref_cnt == 0) unlink(id);
    ++b.ref_cnt;
  }
}

void BlockPool::free_blocks(std::span<const BlockId> ordered_blocks) {
  for (BlockId id : ordered_blocks) {
    TROUPE_CHECK(id >= 0 && id < num_blocks(), "block id out of range");
    KvBlock& b = blocks_[id];
    TROUPE_CHECK(b.ref_cnt > 0, "freeing a block with no references");
    if (--b.ref_cnt == 0) push_back(id);
  }
}

void BlockPool::cache_full_blocks(std::span<const BlockId> blocks,
                                  std::span<const BlockHash> block_hashes,
                                  size_t num_cached_blocks, size_t num_full_blocks,
                                  const StoredBlocksSource& source) {
  if (!enable_caching_) return;
  TROUPE_CHECK(num_full_blocks <= blocks.size() && num_full_blocks <= block_hashes.size(),
               "caching more blocks than the request holds or has hashed");
  BlockStored* run = nullptr;  // the event of the run of newly cached blocks that ends at block i - 1
  for (size_t i = num_cached_blocks; i < num_full_blocks; ++i) {
    KvBlock& b = blocks_[blocks[i]];
    const bool fresh = !b.hash && !cached_.contains(block_hashes[i]);  // else already cached here or elsewhere
    if (b.hash) TROUPE_CHECK(*b.hash == block_hashes[i], "a cached block changed content");
    if (!fresh) {
      run = nullptr;
      continue;
    }
    b.hash = block_hashes[i];
    cached_.emplace(block_hashes[i], b.id);
    if (!events_on_) continue;
    if (!run) {
      BlockStored stored;
      if (i > 0) stored.parent_block_hash = block_hashes[i - 1];
      stored.block_size = source.block_size;
      stored.lora_id = source.lora_id;
      stored.sliding_window = source.sliding_window;
      events_.push_back(std::move(stored));
      run = &std::get<BlockStored>(events_.back());
    }
    run->block_hashes.push_back(block_hashes[i]);
    const auto bs = static_cast<size_t>(source.block_size);
    if (bs > 0 && (i + 1) * bs <= source.tokens.size())
      run->token_ids.insert(run->token_ids.end(), source.tokens.begin() + static_cast<std::ptrdiff_t>(i * bs),
                            source.tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * bs));
  }
}

std::vector<KvEvent> BlockPool::take_events() {
  std::vector<KvEvent> out = std::move(events_);
  events_.clear();
  return out;
}

bool BlockPool::reset_prefix_cache() {
  if (num_free_ != num_blocks()) return false;
  cached_.clear();
  if (events_on_) events_.push_back(AllBlocksCleared{});
  for (KvBlock& b : blocks_) b.hash.reset();
  return true;
}

const KvBlock& BlockPool::block(BlockId id) const {
  TROUPE_CHECK(id >= 0 && id < num_blocks(), "block id out of range");
  return blocks_[id];
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (BlockId id = head_; id != kNone; id = next_[id]) out.push_back(id);
  return out;
}

Status BlockPool::check_invariants() const {
  int32_t walked = 0;
  BlockId prev = kNone;
  for (BlockId id = head_; id != kNone; id = next_[id]) {
    if (prev_[id] != prev) return internal_error(fmt::format("free list: bad back link at block {}", id));
    if (!in_free_list_[id]) return internal_error(fmt::format("block {} linked but not marked free", id));
    if (++walked > num_blocks()) return internal_error("free list has a cycle");
    prev = id;
  }
  if (prev != tail_) return internal_error("free list tail mismatch");
  if (walked != num_free_) return internal_error(fmt::format("free count {} but {} linked", num_free_, walked));
  for (const KvBlock& b : blocks_) {
    if (b.ref_cnt < 0) return internal_error(fmt::format("block {} has ref_cnt {}", b.id, b.ref_cnt));
    if ((b.ref_cnt == 0) != static_cast<bool>(in_free_list_[b.id]))
      return internal_error(fmt::format("block {}: ref_cnt {} but in free list = {}", b.id, b.ref_cnt,
                                        static_cast<bool>(in_free_list_[b.id])));
    if (b.hash) {
      auto it = cached_.find(*b.hash);
      if (it == cached_.end() || it->second != b.id)
        return internal_error(fmt::format("block {} has a hash the cache does not map to it", b.id));
    }
  }
  for (const auto& [hash, id] : cached_) {
    if (!blocks_[id].hash || !(*blocks_[id].hash == hash))
      return internal_error(fmt::format("cache maps a hash to block {} which holds other content", id));
  }
  return Status::ok_status();
}

}  // namespace troupe::sched
