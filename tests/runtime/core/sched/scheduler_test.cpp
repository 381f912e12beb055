#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/sched/forward_batch_builder.hpp"
#include "runtime/core/sched/scheduler.hpp"
#include "tests/runtime/core/sched/fake_model.hpp"

namespace troupe::sched {
namespace {

using testing::FakeModel;
using testing::reference_output;

std::vector<int32_t> tokens(int n, int32_t start = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// fmt rather than operator+: GCC 12 warns falsely (-Wrestrict) on "r" + to_string.
std::string rid(int i) { return fmt::format("r{}", i); }

struct RunResult {
  std::map<std::string, std::vector<int32_t>> outputs;
  int64_t preemptions = 0;
  int64_t prefix_hits = 0;
  int steps = 0;
};

// Drives the scheduler with the fake model until every request is done,
// checking the step limits on the way.
RunResult run_all(Scheduler& sched, FakeModel& model, int max_steps = 10000) {
  RunResult r;
  while (sched.has_unfinished_requests()) {
    EXPECT_LT(r.steps, max_steps) << "scheduler does not make progress";
    if (r.steps >= max_steps) break;
    SchedulerOutput out = sched.schedule();
    ++r.steps;
    EXPECT_FALSE(out.empty()) << "nothing scheduled while requests wait";
    if (out.empty()) break;
    EXPECT_LE(out.num_scheduled_tokens, sched.config().max_num_batched_tokens);
    EXPECT_LE(sched.num_running(), sched.config().max_num_seqs);
    const SchedulerStats st = sched.stats();
    r.preemptions += st.num_preempted_reqs;
    r.prefix_hits += st.prefix_cache_hits;
    auto updates = sched.update_from_output(out, model.run(out));
    EXPECT_TRUE(updates.ok()) << updates.status().to_string();
    if (!updates.ok()) break;
    for (const RequestUpdate& u : *updates) {
      auto& o = r.outputs[u.request_id];
      o.insert(o.end(), u.new_token_ids.begin(), u.new_token_ids.end());
    }
    EXPECT_TRUE(sched.kv_cache().pool().check_invariants().ok());
  }
  return r;
}

TEST(Scheduler, SingleRequestPrefillThenDecode) {
  Scheduler sched({}, {64, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(6), 3, {}}).ok());
  EXPECT_EQ(sched.num_waiting(), 1);
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].token_ids, tokens(6));
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 0);
  EXPECT_TRUE(out.scheduled[0].needs_logits);
  EXPECT_TRUE(out.scheduled[0].is_new);
  EXPECT_EQ(out.scheduled[0].block_table.size(), 2u);
  auto up = sched.update_from_output(out, {{"a", 42}});
  ASSERT_TRUE(up.ok());
  ASSERT_EQ(up->size(), 1u);
  EXPECT_EQ((*up)[0].new_token_ids, std::vector<int32_t>{42});
  EXPECT_FALSE((*up)[0].finished);

  out = sched.schedule();  // decode: only the sampled token
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].token_ids, std::vector<int32_t>{42});
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 6);
  EXPECT_FALSE(out.scheduled[0].is_new);
  ASSERT_TRUE(sched.update_from_output(out, {{"a", 43}}).ok());
  out = sched.schedule();
  up = sched.update_from_output(out, {{"a", 44}});
  ASSERT_TRUE(up.ok());
  EXPECT_TRUE((*up)[0].finished);
  EXPECT_EQ((*up)[0].finish_reason, FinishReason::length);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_DOUBLE_EQ(sched.stats().kv_cache_usage, 0.0);
  out = sched.schedule();
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(out.finished_ids, std::vector<std::string>{"a"});
}

TEST(Scheduler, ChunkedPrefillUnderSmallBudget) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 8;
  Scheduler sched(cfg, {64, 4, true});
  ASSERT_TRUE(sched.add_request({"long", tokens(20), 2, {}}).ok());
  std::vector<int64_t> chunks;
  std::vector<bool> logits;
  for (int i = 0; i < 3; ++i) {
    SchedulerOutput out = sched.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    chunks.push_back(static_cast<int64_t>(out.scheduled[0].token_ids.size()));
    logits.push_back(out.scheduled[0].needs_logits);
    EXPECT_EQ(out.scheduled[0].num_computed_tokens, 8 * i);
    std::unordered_map<std::string, int32_t> sampled;
    if (out.scheduled[0].needs_logits) sampled["long"] = 5;
    ASSERT_TRUE(sched.update_from_output(out, sampled).ok());
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{8, 8, 4}));
  EXPECT_EQ(logits, (std::vector<bool>{false, false, true}));

  // A decode and a new prompt share the budget: the decode goes first.
  ASSERT_TRUE(sched.add_request({"next", tokens(12, 50), 1, {}}).ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].request_id, "long");
  EXPECT_EQ(out.scheduled[0].token_ids.size(), 1u);
  EXPECT_EQ(out.scheduled[1].request_id, "next");
  EXPECT_EQ(out.scheduled[1].token_ids.size(), 7u);
  EXPECT_FALSE(out.scheduled[1].needs_logits);
  EXPECT_EQ(out.num_scheduled_tokens, 8);
}

TEST(Scheduler, ChunkedPrefillOffWaitsForRoomInBudget) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 10;
  cfg.enable_chunked_prefill = false;
  Scheduler sched(cfg, {64, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(6), 4, {}}).ok());
  ASSERT_TRUE(sched.add_request({"b", tokens(6, 100), 4, {}}).ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);  // b's 6 tokens do not fit the 4 left
  EXPECT_EQ(sched.num_waiting(), 1);
  // A prompt larger than the whole budget could never run.
  Status s = sched.add_request({"huge", tokens(11), 1, {}});
  EXPECT_EQ(s.code(), StatusCode::out_of_range);
  EXPECT_NE(s.message().find("chunked prefill is off"), std::string::npos);
}

TEST(Scheduler, MaxNumSeqsRespected) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  Scheduler sched(cfg, {64, 4, true});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(sched.add_request({rid(i), tokens(3, 10 * i), 2, {}}).ok());
  SchedulerOutput out = sched.schedule();
  EXPECT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(sched.num_running(), 2);
  EXPECT_EQ(sched.num_waiting(), 3);
  EXPECT_EQ(out.scheduled[0].request_id, "r0");  // FIFO
  EXPECT_EQ(out.scheduled[1].request_id, "r1");
  FakeModel model(64, 4);
  ASSERT_TRUE(sched.update_from_output(out, model.run(out)).ok());
  RunResult r = run_all(sched, model);
  EXPECT_EQ(r.outputs.size(), 5u);
}

TEST(Scheduler, PreemptionUnderTinyPoolFinishesEveryRequestCorrectly) {
  // 8 blocks of 4 = 32 tokens; six requests of 16 tokens each cannot all run.
  const int32_t num_blocks = 8, block_size = 4;
  Scheduler sched({}, {num_blocks, block_size, true});
  FakeModel model(num_blocks, block_size);
  std::map<std::string, std::vector<int32_t>> expected;
  for (int i = 0; i < 6; ++i) {
    const std::string id = rid(i);
    std::vector<int32_t> prompt = tokens(6, 100 * (i + 1));
    expected[id] = reference_output(prompt, 10);
    ASSERT_TRUE(sched.add_request({id, prompt, 10, {}}).ok());
  }
  RunResult r = run_all(sched, model);
  EXPECT_GT(r.preemptions, 0);
  EXPECT_EQ(r.outputs, expected);
  EXPECT_DOUBLE_EQ(sched.kv_cache().usage(), 0.0);
}

TEST(Scheduler, PreemptedRequestsGoBackToTheFrontAndReportIt) {
  // 4 blocks of 2 tokens; two requests of 3-token prompts grow until one must go.
  Scheduler sched({}, {4, 2, false});
  ASSERT_TRUE(sched.add_request({"old", tokens(3), 5, {}}).ok());
  ASSERT_TRUE(sched.add_request({"new", tokens(3, 20), 5, {}}).ok());
  FakeModel model(4, 2);
  bool saw_preemption = false;
  for (int step = 0; step < 20 && sched.has_unfinished_requests(); ++step) {
    SchedulerOutput out = sched.schedule();
    if (!out.preempted_ids.empty()) {
      saw_preemption = true;
      EXPECT_EQ(out.preempted_ids, std::vector<std::string>{"new"});
      EXPECT_EQ(sched.find_request("new")->status(), RequestStatus::preempted);
      EXPECT_EQ(sched.find_request("new")->num_computed_tokens(), 0);
      EXPECT_TRUE(sched.kv_cache().block_table("new").empty());
      EXPECT_EQ(sched.stats().num_preempted_reqs, 1);
    }
    ASSERT_TRUE(sched.update_from_output(out, model.run(out)).ok());
  }
  EXPECT_TRUE(saw_preemption);
}

TEST(Scheduler, SharedPrefixHitsAndSaltIsolates) {
  const int32_t num_blocks = 64, block_size = 4;
  Scheduler sched({}, {num_blocks, block_size, true});
  FakeModel model(num_blocks, block_size);
  std::vector<int32_t> system = tokens(16, 500);
  std::map<std::string, std::vector<int32_t>> expected;
  auto prompt_with = [&](int32_t tail) {
    std::vector<int32_t> p = system;
    p.push_back(tail);
    p.push_back(tail + 1);
    return p;
  };
  ASSERT_TRUE(sched.add_request({"first", prompt_with(1), 4, {}}).ok());
  expected["first"] = reference_output(prompt_with(1), 4);
  RunResult r1 = run_all(sched, model);
  EXPECT_EQ(r1.prefix_hits, 0);

  ASSERT_TRUE(sched.add_request({"same", prompt_with(7), 4, {}}).ok());
  expected["same"] = reference_output(prompt_with(7), 4);
  SchedulerOutput out = sched.schedule();
  EXPECT_EQ(sched.stats().prefix_cache_hits, 16);
  EXPECT_EQ(sched.stats().prefix_cache_queries, 18);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 16);
  EXPECT_EQ(out.scheduled[0].token_ids.size(), 2u);
  auto up = sched.update_from_output(out, model.run(out));
  ASSERT_TRUE(up.ok());
  RunResult r2 = run_all(sched, model);
  std::vector<int32_t> same = (*up)[0].new_token_ids;
  same.insert(same.end(), r2.outputs["same"].begin(), r2.outputs["same"].end());
  EXPECT_EQ(same, expected["same"]);  // the reused blocks hold the right KV

  ASSERT_TRUE(sched.add_request({"salted", prompt_with(7), 4, std::string("tenant-b")}).ok());
  out = sched.schedule();
  EXPECT_EQ(sched.stats().prefix_cache_hits, 0);
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 0);
}

TEST(Scheduler, IdenticalPromptNeverSkipsItsLastToken) {
  Scheduler sched({}, {64, 4, true});
  FakeModel model(64, 4);
  ASSERT_TRUE(sched.add_request({"a", tokens(8), 1, {}}).ok());
  run_all(sched, model);
  ASSERT_TRUE(sched.add_request({"b", tokens(8), 1, {}}).ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 4);
  EXPECT_EQ(out.scheduled[0].token_ids.size(), 4u);
  EXPECT_TRUE(out.scheduled[0].needs_logits);
}

TEST(Scheduler, AbortFreesEveryBlock) {
  Scheduler sched({}, {32, 4, true});
  FakeModel model(32, 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sched.add_request({rid(i), tokens(9, 10 * i), 20, {}}).ok());
  for (int step = 0; step < 3; ++step) {
    SchedulerOutput out = sched.schedule();
    ASSERT_TRUE(sched.update_from_output(out, model.run(out)).ok());
  }
  ASSERT_TRUE(sched.add_request({"waiting", tokens(5), 3, {}}).ok());
  EXPECT_GT(sched.kv_cache().usage(), 0.0);
  ASSERT_TRUE(sched.abort_request("waiting").ok());  // a waiting one
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sched.abort_request(rid(i)).ok());
  EXPECT_DOUBLE_EQ(sched.kv_cache().usage(), 0.0);
  EXPECT_EQ(sched.kv_cache().num_free_blocks(), 32);
  EXPECT_EQ(sched.kv_cache().num_requests_with_blocks(), 0u);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(sched.abort_request("r0").code(), StatusCode::not_found);
  SchedulerOutput out = sched.schedule();
  EXPECT_EQ(out.finished_ids.size(), 5u);
}

TEST(Scheduler, AbortBetweenScheduleAndUpdateIsSkipped) {
  Scheduler sched({}, {32, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(5), 4, {}}).ok());
  ASSERT_TRUE(sched.add_request({"b", tokens(5, 40), 4, {}}).ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_TRUE(sched.abort_request("a").ok());
  auto up = sched.update_from_output(out, {{"b", 9}});  // no token for the aborted one
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  ASSERT_EQ(up->size(), 1u);
  EXPECT_EQ((*up)[0].request_id, "b");
}

TEST(Scheduler, FinishRequestStopsIt) {
  Scheduler sched({}, {32, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(5), 100, {}}).ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_TRUE(sched.update_from_output(out, {{"a", 2}}).ok());
  ASSERT_TRUE(sched.finish_request("a", FinishReason::stop).ok());
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_DOUBLE_EQ(sched.kv_cache().usage(), 0.0);
}

TEST(Scheduler, UpdateRejectsMissingTokensAndWrongStep) {
  Scheduler sched({}, {32, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(5), 3, {}}).ok());
  SchedulerOutput out = sched.schedule();
  auto up = sched.update_from_output(out, {});
  EXPECT_EQ(up.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(sched.find_request("a")->num_computed_tokens(), 0);  // nothing applied
  SchedulerOutput stale = out;
  stale.step = 99;
  EXPECT_FALSE(sched.update_from_output(stale, {{"a", 1}}).ok());
  ASSERT_TRUE(sched.update_from_output(out, {{"a", 1}}).ok());
  EXPECT_FALSE(sched.update_from_output(out, {{"a", 1}}).ok());  // applied once only
}

TEST(Scheduler, RejectsRequestsThatCanNeverRun) {
  Scheduler sched({}, {4, 4, true});  // 16 tokens of KV
  Status s = sched.add_request({"long", tokens(20), 1, {}});
  EXPECT_EQ(s.code(), StatusCode::out_of_range);
  EXPECT_NE(s.message().find("KV cache capacity of 16 tokens"), std::string::npos) << s.message();
  EXPECT_EQ(sched.add_request({"grows", tokens(10), 7, {}}).code(), StatusCode::out_of_range);
  EXPECT_EQ(sched.add_request({"empty", {}, 1, {}}).code(), StatusCode::invalid_argument);
  EXPECT_EQ(sched.add_request({"zero", tokens(2), 0, {}}).code(), StatusCode::invalid_argument);
  EXPECT_EQ(sched.add_request({"neg", {1, -3}, 1, {}}).code(), StatusCode::invalid_argument);
  EXPECT_EQ(sched.add_request({"", tokens(2), 1, {}}).code(), StatusCode::invalid_argument);
  ASSERT_TRUE(sched.add_request({"ok", tokens(10), 6, {}}).ok());
  EXPECT_EQ(sched.add_request({"ok", tokens(2), 1, {}}).code(), StatusCode::invalid_argument);
  EXPECT_FALSE(sched.has_unfinished_requests() && sched.num_waiting() != 1);

  SchedulerConfig cfg;
  cfg.max_model_len = 8;
  Scheduler limited(cfg, {64, 4, true});
  s = limited.add_request({"a", tokens(6), 3, {}});
  EXPECT_EQ(s.code(), StatusCode::out_of_range);
  EXPECT_NE(s.message().find("maximum model length 8"), std::string::npos) << s.message();
}

TEST(Scheduler, StatsReportCountsAndUsage) {
  Scheduler sched({}, {10, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(8), 2, {}}).ok());
  ASSERT_TRUE(sched.add_request({"b", tokens(3, 30), 2, {}}).ok());
  SchedulerOutput out = sched.schedule();
  SchedulerStats st = sched.stats();
  EXPECT_EQ(st.step, out.step);
  EXPECT_EQ(st.num_running_reqs, 2);
  EXPECT_EQ(st.num_waiting_reqs, 0);
  EXPECT_EQ(st.num_scheduled_tokens, 11);
  EXPECT_DOUBLE_EQ(st.kv_cache_usage, 0.3);  // 2 + 1 of 10 blocks
  EXPECT_EQ(st.prefix_cache_queries, 11);
}

TEST(ForwardBatch, SlotMappingPositionsAndLogits) {
  SchedulerOutput out;
  out.block_size = 4;
  // A chunk in the middle of a prompt (no logits), then a decode.
  out.scheduled.push_back({"p", {11, 12, 13, 14, 15}, 3, {7, 2, 9}, false, false, 0, {}});
  out.scheduled.push_back({"d", {99}, 6, {5, 1}, true, false, 0, {}});
  out.num_scheduled_tokens = 6;
  ForwardBatch b = make_forward_batch(out);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{11, 12, 13, 14, 15, 99}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{3, 4, 5, 6, 7, 6}));
  EXPECT_EQ(b.query_start, (std::vector<int32_t>{0, 5, 6}));
  EXPECT_EQ(b.seq_lens, (std::vector<int32_t>{8, 7}));
  // pos 3 -> block 7 slot 3; pos 4..7 -> block 2; decode pos 6 -> block 1 offset 2.
  EXPECT_EQ(b.slot_mapping, (std::vector<int64_t>{31, 8, 9, 10, 11, 6}));
  EXPECT_EQ(b.logits_indices, std::vector<int32_t>{5});
  EXPECT_EQ(b.block_tables.size(), 2u);
  EXPECT_EQ(b.num_seqs(), 2);

  out.scheduled[0].needs_logits = true;
  b = make_forward_batch(out);
  EXPECT_EQ(b.logits_indices, (std::vector<int32_t>{4, 5}));
}

TEST(ForwardBatch, FromARealSchedule) {
  Scheduler sched({}, {16, 4, true});
  ASSERT_TRUE(sched.add_request({"a", tokens(6), 2, {}}).ok());
  ASSERT_TRUE(sched.add_request({"b", tokens(2, 50), 2, {}}).ok());
  SchedulerOutput out = sched.schedule();
  ForwardBatch b = make_forward_batch(out);
  ASSERT_EQ(b.num_tokens(), 8);
  EXPECT_EQ(b.logits_indices, (std::vector<int32_t>{5, 7}));
  const auto& ta = sched.kv_cache().block_table("a");
  const auto& tb = sched.kv_cache().block_table("b");
  EXPECT_EQ(b.slot_mapping[5], int64_t{ta[1]} * 4 + 1);
  EXPECT_EQ(b.slot_mapping[6], int64_t{tb[0]} * 4);
}

}  // namespace
}  // namespace troupe::sched
