// The KV cache manager with a sliding window on every layer (Mistral-style): blocks wholly
// before the window of a step's first query go back to the pool, the block table keeps
// valid ids, a released block stays a valid prefix-cache entry until it is evicted, and an
// evicted one is never matched.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "runtime/core/sched/kv_cache_manager.hpp"

namespace troupe::sched {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

Request make_request(const std::string& id, std::vector<int32_t> prompt, int max_tokens = 400) {
  return Request(NewRequest{id, std::move(prompt), max_tokens, std::nullopt}, 0);
}

KvCacheManager windowed(int32_t num_blocks, int32_t window, bool caching = true) {
  KvCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = 4;
  c.enable_prefix_caching = caching;
  c.sliding_window = window;
  return KvCacheManager(c);
}

// Prefill the whole prompt in one step (cache hits taken), as the scheduler admits.
void admit(KvCacheManager& kv, Request& r) {
  ComputedBlocks hit = kv.get_computed_blocks(r);
  ASSERT_TRUE(kv.allocate_slots(r, r.num_tokens() - hit.num_tokens, hit.num_tokens, hit.blocks).has_value());
  r.set_num_computed_tokens(r.num_tokens());
}

// One decode step: the next token's slot, then the token.
void decode(KvCacheManager& kv, Request& r, int32_t token) {
  ASSERT_TRUE(kv.allocate_slots(r, 1).has_value());
  r.append_output_token(token);
  r.set_num_computed_tokens(r.num_tokens());
}

// Every entry the window still needs (positions >= first_key) names a held block, no two
// alike, and the released entries name the first held block.
void expect_valid_table(const KvCacheManager& kv, const Request& r, int64_t window) {
  const auto& table = kv.block_table(r.id());
  const int64_t held = kv.num_held_blocks(r.id());
  const size_t released = table.size() - static_cast<size_t>(held);
  ASSERT_GT(held, 0);
  std::set<BlockId> seen;
  for (size_t i = released; i < table.size(); ++i) {
    EXPECT_GT(kv.pool().block(table[i]).ref_cnt, 0) << "entry " << i;
    EXPECT_TRUE(seen.insert(table[i]).second) << "entry " << i;
  }
  for (size_t i = 0; i < released; ++i) EXPECT_EQ(table[i], table[released]) << "entry " << i;
  const int64_t first_key = r.num_computed_tokens() - window + 1;
  EXPECT_LE(static_cast<int64_t>(released) * 4, std::max<int64_t>(0, first_key));
  EXPECT_TRUE(kv.pool().check_invariants().ok()) << kv.pool().check_invariants().to_string();
}

TEST(KvCacheSlidingWindow, BlocksBeforeTheWindowGoBackToThePool) {
  KvCacheManager kv = windowed(32, 8);
  Request r = make_request("a", iota_tokens(40));
  admit(kv, r);  // 10 blocks: the prefill's first query is at 0, nothing is out of its window
  EXPECT_EQ(kv.num_held_blocks("a"), 10);
  decode(kv, r, 7);  // the query at 40 sees keys 33..40: blocks 0..7 (tokens 0..31) go back
  EXPECT_EQ(kv.num_held_blocks("a"), 3);
  EXPECT_EQ(kv.num_free_blocks(), 29);
  expect_valid_table(kv, r, 8);
  KvCacheManager full = windowed(32, 0);
  Request f = make_request("a", iota_tokens(40));
  admit(full, f);
  decode(full, f, 7);
  EXPECT_EQ(full.num_held_blocks("a"), 11);
  EXPECT_EQ(full.num_free_blocks(), 21);
}

TEST(KvCacheSlidingWindow, ALongDecodeHoldsAboutTheWindow) {
  KvCacheManager kv = windowed(16, 8);  // 64 tokens of cache for a 300-token sequence
  Request r = make_request("a", iota_tokens(6));
  admit(kv, r);
  int64_t most = 0;
  for (int i = 0; i < 294; ++i) {
    decode(kv, r, 1000 + i);
    most = std::max(most, kv.num_held_blocks("a"));
    expect_valid_table(kv, r, 8);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(r.num_tokens(), 300);
  EXPECT_EQ(kv.block_table("a").size(), 75u);  // a table for every position
  EXPECT_LE(most, 4);  // the window's 8 keys span at most 3 blocks, plus the next token's
  kv.free("a");
  EXPECT_EQ(kv.num_free_blocks(), 16);
  EXPECT_EQ(kv.num_requests_with_blocks(), 0u);
  EXPECT_TRUE(kv.pool().check_invariants().ok());
}

// A released block keeps its content and hash: a later request with the same prefix hits
// it (the hit is the same blocks, so the same keys and values), and the hit's blocks before
// that request's window are released again at once.
TEST(KvCacheSlidingWindow, ReleasedBlocksStillHitWhileCached) {
  KvCacheManager kv = windowed(32, 8);
  Request a = make_request("a", iota_tokens(40));
  admit(kv, a);
  const std::vector<BlockId> original = kv.block_table("a");
  decode(kv, a, 7);
  ASSERT_EQ(kv.num_held_blocks("a"), 3);
  Request b = make_request("b", iota_tokens(40));
  ComputedBlocks hit = kv.get_computed_blocks(b);
  ASSERT_EQ(hit.num_tokens, 36);  // all 9 full blocks before the last token, released ones included
  for (size_t i = 0; i < hit.blocks.size(); ++i) EXPECT_EQ(hit.blocks[i], original[i]) << i;
  ASSERT_TRUE(kv.allocate_slots(b, 4, hit.num_tokens, hit.blocks).has_value());
  b.set_num_computed_tokens(hit.num_tokens);  // as the scheduler does
  // b's first query is at 36: keys 29..36, so blocks 0..6 are out of its window.
  EXPECT_EQ(kv.num_held_blocks("b"), 3);
  expect_valid_table(kv, b, 8);
}

// Once allocation has evicted a released block, its hash is gone: the chained lookup stops
// there and never returns a block whose content is another sequence's.
TEST(KvCacheSlidingWindow, EvictedReleasedBlocksAreNeverMatched) {
  KvCacheManager kv = windowed(12, 8);
  Request a = make_request("a", iota_tokens(40));
  admit(kv, a);
  const std::vector<BlockId> original = kv.block_table("a");
  decode(kv, a, 7);  // 8 blocks released, 3 held, 1 never used
  ASSERT_EQ(kv.num_free_blocks(), 9);
  Request c = make_request("c", iota_tokens(20, 5000));  // 5 blocks: evicts the never-used one and 4 released
  admit(kv, c);
  Request b = make_request("b", iota_tokens(40));
  ComputedBlocks hit = kv.get_computed_blocks(b);
  EXPECT_LT(hit.num_tokens, 36);
  for (size_t i = 0; i < hit.blocks.size(); ++i) EXPECT_EQ(hit.blocks[i], original[i]) << i;
  for (BlockId id : kv.block_table("c"))
    EXPECT_TRUE(std::find(hit.blocks.begin(), hit.blocks.end(), id) == hit.blocks.end()) << id;
}

// A request that ran with caching off and continues with it on: its released entries (which
// now name another block) are never registered under their positions' hashes.
TEST(KvCacheSlidingWindow, CachingTurnedOnLaterNeverCachesReleasedEntries) {
  KvCacheManager kv = windowed(32, 8, /*caching=*/false);
  Request a = make_request("a", iota_tokens(40));
  admit(kv, a);
  const std::vector<BlockId> original = kv.block_table("a");
  decode(kv, a, 7);
  kv.set_prefix_caching(true);
  decode(kv, a, 8);
  Request b = make_request("b", iota_tokens(40));
  ComputedBlocks hit = kv.get_computed_blocks(b);
  for (size_t i = 0; i < hit.blocks.size(); ++i) EXPECT_EQ(hit.blocks[i], original[i]) << i;
  EXPECT_TRUE(kv.pool().check_invariants().ok());
}

}  // namespace
}  // namespace troupe::sched
