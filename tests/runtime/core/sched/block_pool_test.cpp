#include <gtest/gtest.h>

#include <vector>

#include "runtime/core/sched/block_pool.hpp"

namespace troupe::sched {
namespace {

BlockHash hash_of(int32_t v) {
  const std::vector<int32_t> t = {v};
  return hash_block_tokens(std::nullopt, t, std::nullopt);
}

TEST(BlockPool, StartsAllFreeInIdOrder) {
  BlockPool pool(5, true);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, AllocateAndRefuseWhenShort) {
  BlockPool pool(4, true);
  auto got = pool.get_new_blocks(3);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (std::vector<BlockId>{0, 1, 2}));
  for (BlockId id : *got) EXPECT_EQ(pool.block(id).ref_cnt, 1);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.75);
  EXPECT_FALSE(pool.get_new_blocks(2).has_value());
  EXPECT_EQ(pool.num_free_blocks(), 1);  // a refused request takes nothing
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, FreedLastIsEvictedLast) {
  BlockPool pool(4, true);
  auto got = *pool.get_new_blocks(4);
  pool.free_blocks(std::vector<BlockId>{2, 0});
  pool.free_blocks(std::vector<BlockId>{3});
  pool.free_blocks(std::vector<BlockId>{1});
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{2, 0, 3, 1}));
  EXPECT_EQ(*pool.get_new_blocks(1), std::vector<BlockId>{2});
  EXPECT_EQ(*pool.get_new_blocks(2), (std::vector<BlockId>{0, 3}));
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, RefCountingKeepsSharedBlocksInUse) {
  BlockPool pool(3, true);
  auto got = *pool.get_new_blocks(1);
  const BlockId b = got[0];
  pool.touch(got);  // a second user
  EXPECT_EQ(pool.block(b).ref_cnt, 2);
  pool.free_blocks(got);
  EXPECT_EQ(pool.block(b).ref_cnt, 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);  // still in use
  pool.free_blocks(got);
  EXPECT_EQ(pool.block(b).ref_cnt, 0);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, CachedFreeBlockStaysFindableUntilEvicted) {
  BlockPool pool(3, true);
  auto got = *pool.get_new_blocks(2);  // blocks 0, 1
  const std::vector<BlockHash> hashes = {hash_of(10), hash_of(11)};
  pool.cache_full_blocks(got, hashes, 0, 2);
  EXPECT_EQ(pool.num_cached_blocks(), 2u);
  pool.free_blocks(std::vector<BlockId>{got[1], got[0]});
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{2, 1, 0}));
  // Free but cached: a hit brings it back without touching its content.
  ASSERT_EQ(pool.get_cached_block(hashes[0]), std::optional<BlockId>(got[0]));
  pool.touch(std::vector<BlockId>{got[0]});
  EXPECT_EQ(pool.block(got[0]).ref_cnt, 1);
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{2, 1}));
  EXPECT_TRUE(pool.check_invariants().ok());
  // Allocation takes the uncached block 2 first, then evicts block 1's content.
  EXPECT_EQ(*pool.get_new_blocks(1), std::vector<BlockId>{2});
  EXPECT_TRUE(pool.get_cached_block(hashes[1]).has_value());
  EXPECT_EQ(*pool.get_new_blocks(1), std::vector<BlockId>{1});
  EXPECT_FALSE(pool.get_cached_block(hashes[1]).has_value());
  EXPECT_FALSE(pool.block(1).hash.has_value());
  EXPECT_TRUE(pool.get_cached_block(hashes[0]).has_value());  // in use, kept
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, DuplicateContentIsCachedOnce) {
  BlockPool pool(2, true);
  auto got = *pool.get_new_blocks(2);
  const std::vector<BlockHash> same = {hash_of(7)};
  pool.cache_full_blocks(std::vector<BlockId>{got[0]}, same, 0, 1);
  pool.cache_full_blocks(std::vector<BlockId>{got[1]}, same, 0, 1);
  EXPECT_EQ(pool.get_cached_block(same[0]), std::optional<BlockId>(got[0]));
  EXPECT_FALSE(pool.block(got[1]).hash.has_value());
  // Evicting the uncached twin must not drop the cached one.
  pool.free_blocks(std::vector<BlockId>{got[1]});
  (void)*pool.get_new_blocks(1);
  EXPECT_EQ(pool.get_cached_block(same[0]), std::optional<BlockId>(got[0]));
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, ResetPrefixCacheOnlyWhenIdle) {
  BlockPool pool(2, true);
  auto got = *pool.get_new_blocks(1);
  pool.cache_full_blocks(got, std::vector<BlockHash>{hash_of(1)}, 0, 1);
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.free_blocks(got);
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_EQ(pool.num_cached_blocks(), 0u);
  EXPECT_FALSE(pool.get_cached_block(hash_of(1)).has_value());
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPool, CachingDisabledCachesNothing) {
  BlockPool pool(2, false);
  auto got = *pool.get_new_blocks(1);
  pool.cache_full_blocks(got, std::vector<BlockHash>{hash_of(1)}, 0, 1);
  EXPECT_EQ(pool.num_cached_blocks(), 0u);
}

}  // namespace
}  // namespace troupe::sched
