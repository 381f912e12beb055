// LoRA in the scheduler: adapters must be loaded before requests name them and
// cannot be removed while in use; at most max_loras distinct adapters run; the
// prefix cache never shares blocks between adapters; the batch names each
// sequence's adapter.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/sched/block_hash.hpp"
#include "runtime/core/sched/forward_batch_builder.hpp"
#include "runtime/core/sched/scheduler.hpp"

namespace troupe::sched {
namespace {

NewRequest req(const std::string& id, int64_t lora, std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9}) {
  NewRequest r;
  r.id = id;
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = 4;
  r.lora_id = lora;
  return r;
}

SchedulerConfig config(int32_t max_loras) {
  SchedulerConfig c;
  c.max_loras = max_loras;
  return c;
}

TEST(LoraScheduler, AdaptersAreKnownBeforeUseAndKeptWhileUsed) {
  Scheduler off({}, {64, 4, true});
  EXPECT_EQ(off.add_lora(1).code(), StatusCode::invalid_argument) << "LoRA is off";
  Scheduler s(config(1), {64, 4, true});
  EXPECT_EQ(s.add_request(req("a", 3)).code(), StatusCode::not_found);
  ASSERT_TRUE(s.add_lora(3).ok());
  EXPECT_EQ(s.add_lora(3).code(), StatusCode::invalid_argument);
  ASSERT_TRUE(s.add_request(req("a", 3)).ok());
  EXPECT_EQ(s.remove_lora(3).code(), StatusCode::unavailable);
  ASSERT_TRUE(s.abort_request("a").ok());
  EXPECT_TRUE(s.remove_lora(3).ok());
  EXPECT_EQ(s.remove_lora(3).code(), StatusCode::not_found);
}

TEST(LoraScheduler, AtMostMaxLorasDistinctAdaptersRunAndTheBatchNamesThem) {
  Scheduler s(config(2), {256, 4, true});
  for (int64_t id : {1, 2, 3}) ASSERT_TRUE(s.add_lora(id).ok());
  ASSERT_TRUE(s.add_request(req("l1", 1)).ok());
  ASSERT_TRUE(s.add_request(req("l2", 2)).ok());
  ASSERT_TRUE(s.add_request(req("l3", 3)).ok());  // a third adapter: waits
  ASSERT_TRUE(s.add_request(req("base", 0)).ok());
  ASSERT_TRUE(s.add_request(req("l1b", 1)).ok());
  SchedulerOutput out = s.schedule();
  std::set<std::string> ids;
  std::set<int64_t> loras;
  for (const auto& r : out.scheduled) {
    ids.insert(r.request_id);
    if (r.lora_id != 0) loras.insert(r.lora_id);
  }
  EXPECT_EQ(ids, (std::set<std::string>{"l1", "l2", "base", "l1b"}));
  EXPECT_EQ(loras.size(), 2u);
  ForwardBatch b = make_forward_batch(out);
  ASSERT_EQ(b.lora_ids.size(), out.scheduled.size());
  for (size_t i = 0; i < out.scheduled.size(); ++i) EXPECT_EQ(b.lora_ids[i], out.scheduled[i].lora_id);
  // Once the adapters 1 and 2 are done, adapter 3 runs.
  for (const char* id : {"l1", "l2", "l1b"}) ASSERT_TRUE(s.abort_request(id).ok());
  std::unordered_map<std::string, int32_t> sampled;
  for (const auto& r : out.scheduled)
    if (r.needs_logits) sampled[r.request_id] = 5;
  ASSERT_TRUE(s.update_from_output(out, sampled).ok());
  SchedulerOutput next = s.schedule();
  bool l3 = false;
  for (const auto& r : next.scheduled) l3 |= r.request_id == "l3";
  EXPECT_TRUE(l3);
}

TEST(LoraScheduler, ABaseModelStepHasNoLoraIdsAndHashesDifferPerAdapter) {
  Scheduler s(config(1), {64, 4, true});
  ASSERT_TRUE(s.add_request(req("base", 0)).ok());
  EXPECT_TRUE(make_forward_batch(s.schedule()).lora_ids.empty());
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<BlockHash> base, one, two, one_again;
  extend_block_hashes(base, t, 4, std::nullopt);
  extend_block_hashes(one, t, 4, std::nullopt, 1);
  extend_block_hashes(two, t, 4, std::nullopt, 2);
  extend_block_hashes(one_again, t, 4, std::nullopt, 1);
  EXPECT_NE(base[0], one[0]);
  EXPECT_NE(one[0], two[0]);
  EXPECT_NE(base[1], one[1]) << "chained: every later block differs too";
  EXPECT_EQ(one[1], one_again[1]);
}

TEST(LoraScheduler, ThePrefixCacheIsNotSharedBetweenAdapters) {
  Scheduler s(config(2), {64, 4, true});
  ASSERT_TRUE(s.add_lora(1).ok());
  ASSERT_TRUE(s.add_request(req("first", 1)).ok());
  SchedulerOutput out = s.schedule();
  ASSERT_TRUE(s.update_from_output(out, {{"first", 5}}).ok());
  // Same prompt: the base model and another adapter get no hit; the same adapter does.
  ASSERT_TRUE(s.add_lora(2).ok());
  ASSERT_TRUE(s.add_request(req("base", 0)).ok());
  ASSERT_TRUE(s.add_request(req("other", 2)).ok());
  ASSERT_TRUE(s.add_request(req("same", 1)).ok());
  SchedulerOutput next = s.schedule();
  for (const auto& r : next.scheduled) {
    if (r.request_id == "first") continue;
    if (r.request_id == "same") EXPECT_GT(r.num_computed_tokens, 0) << r.request_id;
    else EXPECT_EQ(r.num_computed_tokens, 0) << r.request_id;
  }
}

}  // namespace
}  // namespace troupe::sched
