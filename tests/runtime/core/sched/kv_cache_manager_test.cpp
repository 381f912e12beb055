#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/core/sched/kv_cache_manager.hpp"

namespace troupe::sched {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

Request make_request(const std::string& id, std::vector<int32_t> prompt,
                     std::optional<std::string> salt = std::nullopt) {
  return Request(NewRequest{id, std::move(prompt), 8, std::move(salt)}, 0);
}

// Admit a request as the scheduler does: look up the cache, allocate its
// prompt, mark the prompt computed.
void admit(KvCacheManager& kv, Request& r) {
  ComputedBlocks hit = kv.get_computed_blocks(r);
  ASSERT_TRUE(kv.allocate_slots(r, r.num_tokens() - hit.num_tokens, hit.num_tokens, hit.blocks).has_value());
  r.set_num_computed_tokens(r.num_tokens());
}

TEST(KvCacheManager, AllocatesCeilOfTokensOverBlockSize) {
  KvCacheManager kv({8, 4, true});
  Request r = make_request("a", iota_tokens(9));
  auto fresh = kv.allocate_slots(r, 9);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->size(), 3u);
  EXPECT_EQ(kv.block_table("a"), *fresh);
  r.set_num_computed_tokens(9);
  // Tokens 10..12 fit in block 3's free slots: nothing new.
  EXPECT_EQ(kv.allocate_slots(r, 3)->size(), 0u);
  EXPECT_EQ(kv.allocate_slots(r, 4)->size(), 1u);
  EXPECT_DOUBLE_EQ(kv.usage(), 0.5);
}

TEST(KvCacheManager, NoRoomChangesNothing) {
  KvCacheManager kv({2, 4, true});
  Request r = make_request("a", iota_tokens(12));
  EXPECT_FALSE(kv.allocate_slots(r, 12).has_value());
  EXPECT_TRUE(kv.block_table("a").empty());
  EXPECT_EQ(kv.num_free_blocks(), 2);
  EXPECT_EQ(kv.num_requests_with_blocks(), 0u);
}

TEST(KvCacheManager, SharedPrefixHitsFullBlocksOnly) {
  KvCacheManager kv({16, 4, true});
  std::vector<int32_t> shared = iota_tokens(10);  // 2 full blocks + 2 tokens
  Request a = make_request("a", shared);
  admit(kv, a);
  std::vector<int32_t> other = shared;
  other.push_back(7);
  other.push_back(8);
  other.push_back(9);
  Request b = make_request("b", other);
  ComputedBlocks hit = kv.get_computed_blocks(b);
  EXPECT_EQ(hit.num_tokens, 8);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.blocks[0], kv.block_table("a")[0]);
  EXPECT_EQ(hit.blocks[1], kv.block_table("a")[1]);
  auto fresh = kv.allocate_slots(b, b.num_tokens() - hit.num_tokens, hit.num_tokens, hit.blocks);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->size(), 2u);  // tokens 8..12
  EXPECT_EQ(kv.pool().block(hit.blocks[0]).ref_cnt, 2);
  EXPECT_EQ(kv.prefix_cache_stats().hits, 8);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 10 + 13);
  EXPECT_TRUE(kv.pool().check_invariants().ok());
}

TEST(KvCacheManager, DifferentSaltNeverHits) {
  KvCacheManager kv({16, 4, true});
  Request a = make_request("a", iota_tokens(12), std::string("alice"));
  admit(kv, a);
  Request b = make_request("b", iota_tokens(12), std::string("bob"));
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 0);
  Request c = make_request("c", iota_tokens(12));
  EXPECT_EQ(kv.get_computed_blocks(c).num_tokens, 0);
  Request d = make_request("d", iota_tokens(12), std::string("alice"));
  EXPECT_EQ(kv.get_computed_blocks(d).num_tokens, 8);  // 12 - 1 -> 2 full blocks
}

TEST(KvCacheManager, NeverTheWholePrompt) {
  KvCacheManager kv({16, 4, true});
  Request a = make_request("a", iota_tokens(8));
  admit(kv, a);
  kv.free("a");
  Request b = make_request("b", iota_tokens(8));
  // Both blocks are cached, but the last token must be computed for logits.
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 4);
  Request c = make_request("c", iota_tokens(9));
  EXPECT_EQ(kv.get_computed_blocks(c).num_tokens, 8);
}

TEST(KvCacheManager, FreedBlocksHitAgainAndTailIsEvictedFirst) {
  KvCacheManager kv({6, 4, true});
  Request a = make_request("a", iota_tokens(12));
  admit(kv, a);
  const std::vector<BlockId> table = kv.block_table("a");
  kv.free("a");
  EXPECT_DOUBLE_EQ(kv.usage(), 0.0);
  // Freed in reverse: the last block of the sequence is evicted first.
  const std::vector<BlockId> fl = kv.pool().free_list();
  ASSERT_EQ(fl.size(), 6u);
  EXPECT_EQ((std::vector<BlockId>(fl.end() - 3, fl.end())), (std::vector<BlockId>{table[2], table[1], table[0]}));
  // Still cached while free.
  Request b = make_request("b", iota_tokens(13));
  ComputedBlocks hit = kv.get_computed_blocks(b);
  EXPECT_EQ(hit.num_tokens, 12);
  EXPECT_EQ(hit.blocks, table);
}

TEST(KvCacheManager, EvictableHitsAreNotCountedAsFree) {
  // 3 blocks; a's 2 cached blocks are free. b hits them and needs 2 more
  // blocks: only 1 is really available, so no room.
  KvCacheManager kv({3, 4, true});
  Request a = make_request("a", iota_tokens(8));
  admit(kv, a);
  kv.free("a");
  std::vector<int32_t> longer = iota_tokens(16);
  Request b = make_request("b", longer);
  ComputedBlocks hit = kv.get_computed_blocks(b);
  ASSERT_EQ(hit.num_tokens, 8);
  EXPECT_FALSE(kv.allocate_slots(b, 8, hit.num_tokens, hit.blocks).has_value());
  EXPECT_EQ(kv.num_free_blocks(), 3);
  EXPECT_TRUE(kv.pool().check_invariants().ok());
  EXPECT_TRUE(kv.allocate_slots(b, 4, hit.num_tokens, hit.blocks).has_value());
  EXPECT_EQ(kv.num_free_blocks(), 0);
}

TEST(KvCacheManager, GeneratedTokensBecomeCacheable) {
  KvCacheManager kv({8, 4, true});
  Request a = make_request("a", iota_tokens(6));
  admit(kv, a);
  a.append_output_token(1);
  a.append_output_token(2);  // 8 known tokens: block 1 is full once computed
  ASSERT_TRUE(kv.allocate_slots(a, 2).has_value());
  a.set_num_computed_tokens(8);
  kv.free("a");
  std::vector<int32_t> p = iota_tokens(6);
  p.insert(p.end(), {1, 2, 3});
  Request b = make_request("b", p);
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 8);
}

TEST(KvCacheManager, DisabledPrefixCachingFindsNothing) {
  KvCacheManager kv({8, 4, false});
  Request a = make_request("a", iota_tokens(9));
  admit(kv, a);
  kv.free("a");
  Request b = make_request("b", iota_tokens(9));
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 0);
  EXPECT_EQ(kv.pool().num_cached_blocks(), 0u);
  kv.set_prefix_caching(true);
  admit(kv, b);
  kv.free("b");
  Request c = make_request("c", iota_tokens(9));
  EXPECT_EQ(kv.get_computed_blocks(c).num_tokens, 8);
  kv.set_prefix_caching(false);  // idle: also drops cached content
  EXPECT_EQ(kv.pool().num_cached_blocks(), 0u);
}

TEST(KvCacheManager, TakeStatsResets) {
  KvCacheManager kv({8, 4, true});
  Request a = make_request("a", iota_tokens(5));
  (void)kv.get_computed_blocks(a);
  PrefixCacheStats s = kv.take_prefix_cache_stats();
  EXPECT_EQ(s.queries, 5);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.requests, 1);
  EXPECT_EQ(kv.prefix_cache_stats().queries, 0);
}

}  // namespace
}  // namespace troupe::sched
