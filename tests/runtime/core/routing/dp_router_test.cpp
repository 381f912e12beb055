// DpRouter and the built-in routing policies: round robin, least loaded, prefix
// affinity (a prefix follows the replica that cached it, until that one is busier than
// the rest by more than the slack), pins (X-data-parallel-rank), health, and a policy a
// plugin registers by name.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/routing/dp_router.hpp"

namespace troupe::engine {
namespace {

constexpr int32_t kBlock = 4;

DpRouter make_router(const char* policy, int32_t replicas) {
  EngineConfig config;
  auto p = routing::routing_policy_registry::create(policy, config);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return DpRouter(replicas, kBlock, std::move(p).value(), policy);
}

CoreRequest request(const std::string& id, std::vector<int32_t> prompt, int32_t pin = -1) {
  CoreRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.data_parallel_rank = pin;
  return r;
}

std::vector<int32_t> prompt_of(int32_t seed, int n = 40) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), seed * 1000);
  return t;
}

// Replica `r` reports that its cache now holds the full blocks of `prompt`.
void cache_on(DpRouter& router, int32_t r, const std::vector<int32_t>& prompt) {
  std::vector<sched::BlockHash> hashes;
  sched::extend_block_hashes(hashes, prompt, kBlock, std::nullopt, 0);
  ReplicaUpdate u;
  u.replica = r;
  sched::BlockStored stored;
  stored.block_hashes = hashes;
  stored.block_size = kBlock;
  u.kv_events.push_back(stored);
  router.update(u);
}

void finish(DpRouter& router, int32_t r, const std::string& id) {
  ReplicaUpdate u;
  u.replica = r;
  u.finished_ids = {id};
  router.update(u);
}

void set_health(DpRouter& router, int32_t r, Status health) {
  ReplicaUpdate u;
  u.replica = r;
  u.health = std::move(health);
  router.update(u);
}

TEST(DpRouter, RoundRobinCyclesAndSkipsLostReplicas) {
  DpRouter router = make_router("round_robin", 3);
  EXPECT_EQ(*router.route(request("a", prompt_of(1))), 0);
  EXPECT_EQ(*router.route(request("b", prompt_of(1))), 1);
  EXPECT_EQ(*router.route(request("c", prompt_of(1))), 2);
  set_health(router, 0, unavailable("node gone"));
  EXPECT_EQ(*router.route(request("d", prompt_of(1))), 1);
  EXPECT_EQ(*router.route(request("e", prompt_of(1))), 2);
  EXPECT_EQ(*router.route(request("f", prompt_of(1))), 1);
}

TEST(DpRouter, LeastLoadedCountsRequestsInFlightExactly) {
  DpRouter router = make_router("least_loaded", 2);
  EXPECT_EQ(*router.route(request("a", prompt_of(1))), 0);
  EXPECT_EQ(*router.route(request("b", prompt_of(1))), 1);
  EXPECT_EQ(*router.route(request("c", prompt_of(1))), 0);
  finish(router, 0, "a");
  finish(router, 0, "c");
  EXPECT_EQ(router.states()[0].num_in_flight, 0);
  EXPECT_EQ(*router.route(request("d", prompt_of(1))), 0);
  EXPECT_EQ(router.replica_of("d"), 0);
  EXPECT_EQ(router.replica_of("a"), -1);
  finish(router, 1, "d");  // the wrong replica's report changes nothing
  EXPECT_EQ(router.replica_of("d"), 0);
}

TEST(DpRouter, PrefixAffinityFollowsTheCacheUntilTheLoadIsUneven) {
  DpRouter router = make_router("prefix_affinity", 3);
  const auto hot = prompt_of(7);
  cache_on(router, 2, hot);
  auto longer = hot;
  longer.insert(longer.end(), {1, 2, 3, 4, 5});
  EXPECT_EQ(*router.route(request("a", longer)), 2);  // 10 blocks cached there, none elsewhere
  EXPECT_EQ(router.states()[2].num_cached_prompt_blocks, 10);
  EXPECT_EQ(*router.route(request("b", hot)), 2);
  EXPECT_EQ(*router.route(request("c", hot)), 2);  // 2 more in flight than the others: the slack
  // A third would make it uneven: the least loaded replica takes it.
  EXPECT_EQ(*router.route(request("d", hot)), 0);
  // A prompt nobody caches goes to the least loaded.
  EXPECT_EQ(*router.route(request("e", prompt_of(9))), 1);
  // Once replica 0 caches the prefix too, the two share it.
  cache_on(router, 0, hot);
  EXPECT_EQ(*router.route(request("f", hot)), 0);
}

TEST(DpRouter, RemovedAndClearedBlocksStopAttracting) {
  DpRouter router = make_router("prefix_affinity", 2);
  const auto p = prompt_of(3);
  cache_on(router, 1, p);
  EXPECT_EQ(router.num_cached_blocks(1), 10u);
  ReplicaUpdate u;
  u.replica = 1;
  std::vector<sched::BlockHash> hashes;
  sched::extend_block_hashes(hashes, p, kBlock, std::nullopt, 0);
  u.kv_events.push_back(sched::BlockRemoved{{hashes[0]}});
  router.update(u);
  EXPECT_EQ(router.cached_prefix_blocks(1, hashes), 0);  // the chain starts with the removed block
  u.kv_events = {sched::AllBlocksCleared{}};
  router.update(u);
  EXPECT_EQ(router.num_cached_blocks(1), 0u);
  EXPECT_EQ(*router.route(request("a", p)), 0);
}

TEST(DpRouter, PinsAreHonouredOrRefusedClearly) {
  DpRouter router = make_router("prefix_affinity", 2);
  EXPECT_EQ(*router.route(request("a", prompt_of(1), 1)), 1);
  auto out = router.route(request("b", prompt_of(1), 2));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(out.status().message().find("X-data-parallel-rank 2 is out of range"), std::string::npos);
  set_health(router, 1, unavailable("the worker of rank 0 (replica 1, node 10.0.0.2:7000) died"));
  out = router.route(request("c", prompt_of(1), 1));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::unavailable);
  EXPECT_NE(out.status().message().find("replica 1"), std::string::npos);
  EXPECT_EQ(*router.route(request("d", prompt_of(1))), 0);
  set_health(router, 0, unavailable("gone too"));
  out = router.route(request("e", prompt_of(1)));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("no replica serves: replica 0: gone too; replica 1:"), std::string::npos)
      << out.status().message();
  set_health(router, 1, {});  // back after its rebuild
  EXPECT_EQ(*router.route(request("f", prompt_of(1))), 1);
}

// A plugin's policy, registered by name as a general plugin would.
class AlwaysLast final : public routing::RoutingPolicy {
 public:
  int32_t choose(const routing::RoutingRequest&, std::span<const routing::ReplicaState> replicas) override {
    return static_cast<int32_t>(replicas.size());  // one past the end when `broken`
  }
};
Result<std::unique_ptr<routing::RoutingPolicy>> make_always_last(const ConfigView&) {
  return std::unique_ptr<routing::RoutingPolicy>(std::make_unique<AlwaysLast>());
}

TEST(DpRouter, APolicyFromAPluginIsUsedAndItsBadAnswerNamed) {
  routing::routing_policy_registry::register_policy("test_always_past_the_end", &make_always_last);
  auto names = routing::routing_policy_registry::registered_policies();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_always_past_the_end"), names.end());
  DpRouter router = make_router("test_always_past_the_end", 2);
  auto out = router.route(request("a", prompt_of(1)));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("routing policy 'test_always_past_the_end' chose replica 2"),
            std::string::npos);
  EngineConfig config;
  auto missing = routing::routing_policy_registry::create("nope", config);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("registered: least_loaded, prefix_affinity, round_robin, test_always_past_the_end"),
            std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace troupe::engine
