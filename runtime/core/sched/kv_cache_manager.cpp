#include "runtime/core/sched/kv_cache_manager.hpp"

#include <algorithm>

#include "troupe/check.hpp"
#include "troupe/log.hpp"

namespace troupe::sched {
namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
const std::vector<BlockId> kNoBlocks;
}  // namespace

KvCacheManager::KvCacheManager(KvCacheConfig config)
    : config_(config),
      caching_(config.enable_prefix_caching),
      pool_(config.num_blocks, /*enable_caching=*/true) {
  TROUPE_CHECK(config.block_size > 0, "block size must be positive");
  pool_.set_events_enabled(config.kv_events);
}

void KvCacheManager::set_prefix_caching(bool enabled) {
  if (!enabled && caching_ && !pool_.reset_prefix_cache())
    TROUPE_LOG_DEBUG("prefix caching off; cached blocks stay until evicted (blocks in use)");
  caching_ = enabled;
}

void KvCacheManager::update_block_hashes(Request& request) const {
  extend_block_hashes(request.block_hashes(), request.all_token_ids(), config_.block_size,
                      request.cache_salt(), request.lora_id());
}

ComputedBlocks KvCacheManager::get_computed_blocks(Request& request) {
  ComputedBlocks out;
  if (!caching_) return out;
  update_block_hashes(request);
  // At least one token must be computed to get logits: look at most at
  // num_tokens - 1 tokens, i.e. the blocks fully inside them.
  const int64_t max_hit_tokens = request.num_tokens() - 1;
  const auto max_blocks = static_cast<size_t>(std::max<int64_t>(0, max_hit_tokens / config_.block_size));
  const auto& hashes = request.block_hashes();
  for (size_t i = 0; i < std::min(max_blocks, hashes.size()); ++i) {
    auto hit = pool_.get_cached_block(hashes[i]);
    if (!hit) break;  // chained hashes: no later block can hit either
    out.blocks.push_back(*hit);
  }
  out.num_tokens = static_cast<int64_t>(out.blocks.size()) * config_.block_size;
  stats_.requests += 1;
  stats_.queries += request.num_tokens();
  stats_.hits += out.num_tokens;
  return out;
}

std::optional<std::vector<BlockId>> KvCacheManager::allocate_slots(
    Request& request, int64_t num_new_tokens, int64_t num_new_computed_tokens,
    const std::vector<BlockId>& computed_blocks) {
  TROUPE_CHECK(num_new_tokens >= 0 && num_new_computed_tokens >= 0, "negative token count");
  auto& table = tables_[request.id()];
  TROUPE_CHECK(computed_blocks.empty() || table.empty(),
               "cache hits are only taken by a request that holds no blocks");
  TROUPE_CHECK(static_cast<int64_t>(computed_blocks.size()) * config_.block_size == num_new_computed_tokens,
               "computed tokens must fill the computed blocks exactly");

  const int64_t num_computed = request.num_computed_tokens() + num_new_computed_tokens;
  const int64_t num_need_slots = num_computed + num_new_tokens;
  // Blocks out of the window go back first, so that this step may reuse them.
  release_out_of_window(request.id(), table, num_computed);
  const int64_t have = static_cast<int64_t>(table.size() + computed_blocks.size());
  const int64_t to_allocate = std::max<int64_t>(0, cdiv(num_need_slots, config_.block_size) - have);

  // Cache hits sitting in the free list are about to leave it, so they are
  // not available for the new blocks.
  int64_t evictable_hits = 0;
  for (BlockId id : computed_blocks)
    if (pool_.block(id).ref_cnt == 0) ++evictable_hits;
  if (to_allocate > pool_.num_free_blocks() - evictable_hits) {
    if (table.empty()) tables_.erase(request.id());
    return std::nullopt;
  }

  if (!computed_blocks.empty()) {
    pool_.touch(computed_blocks);
    table.insert(table.end(), computed_blocks.begin(), computed_blocks.end());
    num_cached_blocks_[request.id()] = computed_blocks.size();  // already hashed
  }
  auto fresh = pool_.get_new_blocks(static_cast<int32_t>(to_allocate));
  TROUPE_CHECK(fresh.has_value(), "free block count was checked");
  table.insert(table.end(), fresh->begin(), fresh->end());
  // Cache hits before the window (a new request's): taken above, released again now.
  release_out_of_window(request.id(), table, num_computed);

  if (caching_) {
    // Blocks the step will fill with known tokens become findable now, as in
    // vLLM: a later request in the same step may reuse them.
    update_block_hashes(request);
    const int64_t cacheable_tokens = std::min(num_need_slots, request.num_tokens());
    const auto num_full = static_cast<size_t>(cacheable_tokens / config_.block_size);
    size_t& done = num_cached_blocks_[request.id()];
    // Released entries name another block now: never offered to the cache under their hash
    // (they were when they filled, unless caching was off then).
    if (auto r = num_released_.find(request.id()); r != num_released_.end()) done = std::max(done, r->second);
    if (num_full > done) {
      pool_.cache_full_blocks(table, request.block_hashes(), done, num_full,
                              {request.all_token_ids(), config_.block_size, request.lora_id(), config_.sliding_window});
      done = num_full;
    }
  }
  if (table.empty()) tables_.erase(request.id());
  return std::move(*fresh);
}

void KvCacheManager::release_out_of_window(const std::string& request_id, std::vector<BlockId>& table,
                                          int64_t num_computed) {
  const int64_t w = config_.sliding_window;
  if (w <= 0 || table.empty()) return;
  const int64_t first_key = num_computed - w + 1;  // the step's first query sees keys from here on
  if (first_key <= 0) return;
  const auto out_of_window =
      std::min(static_cast<size_t>(first_key / config_.block_size), table.size() - 1);  // keep one block
  size_t& released = num_released_[request_id];
  if (out_of_window <= released) return;
  std::vector<BlockId> last_first(table.rend() - static_cast<std::ptrdiff_t>(out_of_window),
                                  table.rend() - static_cast<std::ptrdiff_t>(released));
  pool_.free_blocks(last_first);  // the later blocks are evicted first: the chain's head stays findable longer
  released = out_of_window;
  std::fill(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(released), table[released]);
}

void KvCacheManager::free(const std::string& request_id) {
  num_cached_blocks_.erase(request_id);
  size_t released = 0;
  if (auto r = num_released_.find(request_id); r != num_released_.end()) {
    released = r->second;
    num_released_.erase(r);
  }
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return;
  std::vector<BlockId> reversed(it->second.rbegin(), it->second.rend() - static_cast<std::ptrdiff_t>(released));
  pool_.free_blocks(reversed);
  tables_.erase(it);
}

int64_t KvCacheManager::num_held_blocks(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return 0;
  auto r = num_released_.find(request_id);
  return static_cast<int64_t>(it->second.size() - (r == num_released_.end() ? 0 : r->second));
}

const std::vector<BlockId>& KvCacheManager::block_table(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  return it == tables_.end() ? kNoBlocks : it->second;
}

PrefixCacheStats KvCacheManager::take_prefix_cache_stats() {
  PrefixCacheStats out = stats_;
  stats_ = {};
  return out;
}

}  // namespace troupe::sched
