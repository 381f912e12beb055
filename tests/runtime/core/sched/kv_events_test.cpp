// KV events (runtime/core/sched/kv_events.hpp): replaying them gives exactly the
// set of hashes the prefix cache can hit, at every point of a random workload with
// shared prefixes, evictions and resets; a BlockStored carries its chain's parent,
// tokens and block size as vLLM's does.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <unordered_set>
#include <vector>

#include "runtime/core/sched/kv_cache_manager.hpp"

namespace troupe::sched {
namespace {

using HashSet = std::unordered_set<BlockHash, BlockHashHasher>;

Request make_request(const std::string& id, std::vector<int32_t> prompt, int64_t lora_id = 0) {
  NewRequest spec{id, std::move(prompt), 8, std::nullopt};
  spec.lora_id = lora_id;
  return Request(std::move(spec), 0);
}

KvCacheConfig config(int32_t blocks, int32_t block_size) {
  KvCacheConfig c{blocks, block_size, true};
  c.kv_events = true;
  return c;
}

// Whether `replayed` is exactly the set of hashes the pool maps to a block.
void expect_same_as_pool(const HashSet& replayed, const BlockPool& pool) {
  ASSERT_EQ(replayed.size(), pool.num_cached_blocks());
  for (const BlockHash& h : replayed) ASSERT_TRUE(pool.get_cached_block(h).has_value());
}

TEST(KvEvents, StoredCarriesParentTokensAndBlockSize) {
  KvCacheManager kv(config(16, 4));
  std::vector<int32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 100);
  Request r = make_request("a", tokens, 3);
  ASSERT_TRUE(kv.allocate_slots(r, 10).has_value());  // 2 full blocks become cached
  auto events = kv.take_kv_events();
  ASSERT_EQ(events.size(), 1u);
  const auto& s = std::get<BlockStored>(events[0]);
  EXPECT_EQ(s.block_hashes, (std::vector<BlockHash>{r.block_hashes()[0], r.block_hashes()[1]}));
  EXPECT_FALSE(s.parent_block_hash.has_value());
  EXPECT_EQ(s.token_ids, std::vector<int32_t>(tokens.begin(), tokens.begin() + 8));
  EXPECT_EQ(s.block_size, 4);
  EXPECT_EQ(s.lora_id, 3);
  // Two more tokens fill block 2: its event names block 1 as the parent.
  r.set_num_computed_tokens(10);
  r.append_output_token(1);
  r.append_output_token(2);
  ASSERT_TRUE(kv.allocate_slots(r, 2).has_value());
  events = kv.take_kv_events();
  ASSERT_EQ(events.size(), 1u);
  const auto& next = std::get<BlockStored>(events[0]);
  EXPECT_EQ(next.block_hashes, std::vector<BlockHash>{r.block_hashes()[2]});
  EXPECT_EQ(next.parent_block_hash, std::optional<BlockHash>(r.block_hashes()[1]));
  EXPECT_EQ(next.token_ids, (std::vector<int32_t>{108, 109, 1, 2}));
  EXPECT_TRUE(kv.take_kv_events().empty());
}

TEST(KvEvents, OffRecordsNothing) {
  KvCacheManager kv({16, 4, true});
  Request r = make_request("a", std::vector<int32_t>(12, 5));
  ASSERT_TRUE(kv.allocate_slots(r, 12).has_value());
  EXPECT_TRUE(kv.take_kv_events().empty());
}

TEST(KvEvents, EvictionIsOneRemovedPerBlockAndResetClearsAll) {
  KvCacheManager kv(config(2, 4));
  Request a = make_request("a", {1, 2, 3, 4, 5, 6, 7, 8});
  ASSERT_TRUE(kv.allocate_slots(a, 8).has_value());
  kv.free("a");
  Request b = make_request("b", {9, 9, 9, 9, 9});
  ASSERT_TRUE(kv.allocate_slots(b, 5).has_value());  // evicts both of a's blocks
  auto events = kv.take_kv_events();
  ASSERT_EQ(events.size(), 4u);  // a's store, two removals, b's store
  EXPECT_TRUE(std::holds_alternative<BlockStored>(events[0]));
  EXPECT_EQ(std::get<BlockRemoved>(events[1]).block_hashes.size(), 1u);
  EXPECT_EQ(std::get<BlockRemoved>(events[2]).block_hashes.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<BlockStored>(events[3]));
  kv.free("b");
  ASSERT_TRUE(kv.reset_prefix_cache());
  events = kv.take_kv_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events[0]));
}

// Random requests over a few shared prefixes in a small cache: after every operation the
// replayed events equal the pool's cached hashes.
TEST(KvEvents, ReplayFollowsThePrefixCacheExactly) {
  std::mt19937 rng(7);
  KvCacheManager kv(config(24, 4));
  std::vector<std::vector<int32_t>> prefixes(4);
  for (auto& p : prefixes)
    for (int i = 0; i < 12; ++i) p.push_back(static_cast<int32_t>(rng() % 50));
  HashSet replayed;
  std::vector<std::unique_ptr<Request>> live;
  int next_id = 0;
  for (int op = 0; op < 2000; ++op) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 5) {  // admit: a shared prefix plus a random tail
      std::vector<int32_t> prompt = prefixes[rng() % prefixes.size()];
      for (int i = 0, n = static_cast<int>(rng() % 9); i < n; ++i) prompt.push_back(static_cast<int32_t>(rng() % 50));
      auto r = std::make_unique<Request>(make_request(std::string("r").append(std::to_string(next_id++)), prompt));
      ComputedBlocks hit = kv.get_computed_blocks(*r);
      if (kv.allocate_slots(*r, r->num_tokens() - hit.num_tokens, hit.num_tokens, hit.blocks)) {
        r->set_num_computed_tokens(r->num_tokens());
        live.push_back(std::move(r));
      }
    } else if (what < 9 && !live.empty()) {  // finish one
      const size_t i = rng() % live.size();
      kv.free(live[i]->id());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (live.empty()) {
      ASSERT_TRUE(kv.reset_prefix_cache());
    }
    apply_kv_events(kv.take_kv_events(), replayed);
    expect_same_as_pool(replayed, kv.pool());
    ASSERT_TRUE(kv.pool().check_invariants().ok());
  }
  EXPECT_GT(replayed.size(), 0u);
}

}  // namespace
}  // namespace troupe::sched
