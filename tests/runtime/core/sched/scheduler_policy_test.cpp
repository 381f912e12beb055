// The scheduler under a pluggable SchedulerPolicy: the registry's built-in
// FCFS and its errors, admission in a priority policy's order, the refusal of
// priorities under FCFS, and preemption of the lowest-priority request, also
// when it was scheduled earlier in the same step, with outputs still equal to
// each request running alone (the fake model reads the KV cache back).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/sched/scheduler.hpp"
#include "tests/runtime/core/sched/fake_model.hpp"
#include "troupe/scheduler_policy.hpp"

namespace troupe::sched {
namespace {

using testing::FakeModel;
using testing::reference_output;

std::vector<int32_t> tokens(int n, int32_t start = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

/// Lower priority value first, then arrival (vLLM's priority scheduling).
class PriorityPolicy final : public SchedulerPolicy {
 public:
  bool before(const SchedulingRequest& a, const SchedulingRequest& b) const override {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.arrival_order < b.arrival_order;
  }
  bool uses_priority() const override { return true; }
};

NewRequest request(std::string id, std::vector<int32_t> prompt, int64_t max_tokens, int32_t priority) {
  NewRequest r;
  r.id = std::move(id);
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.priority = priority;
  return r;
}

/// Runs every request to the end; returns the order in which requests were first scheduled.
std::vector<std::string> run_all(Scheduler& sched, FakeModel& model, std::map<std::string, std::vector<int32_t>>* outputs,
                                 int64_t* preemptions) {
  std::vector<std::string> admitted;
  for (int step = 0; sched.has_unfinished_requests(); ++step) {
    EXPECT_LT(step, 10000) << "no progress";
    if (step >= 10000) break;
    SchedulerOutput out = sched.schedule();
    EXPECT_FALSE(out.empty());
    if (out.empty()) break;
    EXPECT_LE(out.num_scheduled_tokens, sched.config().max_num_batched_tokens);
    *preemptions += static_cast<int64_t>(out.preempted_ids.size());
    for (const auto& s : out.scheduled) {
      EXPECT_EQ(std::count(out.preempted_ids.begin(), out.preempted_ids.end(), s.request_id), 0)
          << s.request_id << " is both scheduled and preempted in step " << out.step;
      if (s.is_new && s.num_computed_tokens == 0 &&
          std::find(admitted.begin(), admitted.end(), s.request_id) == admitted.end())
        admitted.push_back(s.request_id);
    }
    auto updates = sched.update_from_output(out, model.run(out));
    EXPECT_TRUE(updates.ok()) << updates.status().to_string();
    if (!updates.ok()) break;
    for (const RequestUpdate& u : *updates) {
      auto& o = (*outputs)[u.request_id];
      o.insert(o.end(), u.new_token_ids.begin(), u.new_token_ids.end());
    }
    EXPECT_TRUE(sched.kv_cache().pool().check_invariants().ok());
  }
  return admitted;
}

TEST(SchedulerPolicyRegistry, FcfsIsBuiltInAndUnknownNamesListTheRegistered) {
  EXPECT_TRUE(scheduler_policy_registry::is_registered(kFcfsSchedulerPolicy));
  auto names = scheduler_policy_registry::registered_policies();
  EXPECT_NE(std::find(names.begin(), names.end(), "fcfs"), names.end());
  auto fcfs = scheduler_policy_registry::create("fcfs", EngineConfig{});
  ASSERT_TRUE(fcfs.ok()) << fcfs.status().to_string();
  EXPECT_FALSE((*fcfs)->uses_priority());
  auto missing = scheduler_policy_registry::create("no-such-policy", EngineConfig{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find("'no-such-policy'"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("registered: fcfs"), std::string::npos) << missing.status().message();
}

TEST(SchedulerPolicyRegistry, RegisteringTheSameFactoryTwiceIsANoOp) {
  auto factory = +[](const ConfigView&) -> Result<std::unique_ptr<SchedulerPolicy>> {
    return std::unique_ptr<SchedulerPolicy>(std::make_unique<PriorityPolicy>());
  };
  scheduler_policy_registry::register_policy("test-priority", factory);
  scheduler_policy_registry::register_policy("test-priority", factory);
  auto made = scheduler_policy_registry::create("test-priority", EngineConfig{});
  ASSERT_TRUE(made.ok());
  EXPECT_TRUE((*made)->uses_priority());
}

TEST(SchedulerPolicy, FcfsRefusesPriorities) {
  Scheduler sched({}, {64, 4, true});
  Status st = sched.add_request(request("a", tokens(4), 2, 3));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("priority 3"), std::string::npos) << st.message();
  EXPECT_TRUE(sched.add_request(request("b", tokens(4), 2, 0)).ok());
}

TEST(SchedulerPolicy, WaitingRequestsAreAdmittedInPriorityOrder) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 1;  // one at a time: admission order is the order of service
  Scheduler sched(cfg, {64, 4, true}, std::make_shared<PriorityPolicy>());
  FakeModel model(64, 4);
  const std::vector<std::pair<std::string, int32_t>> arrivals = {{"p5", 5}, {"p1", 1}, {"p3", 3}, {"p1b", 1},
                                                                {"m2", -2}};
  std::map<std::string, std::vector<int32_t>> expected;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    auto prompt = tokens(5, static_cast<int32_t>(100 * (i + 1)));
    expected[arrivals[i].first] = reference_output(prompt, 3);
    ASSERT_TRUE(sched.add_request(request(arrivals[i].first, prompt, 3, arrivals[i].second)).ok());
  }
  std::map<std::string, std::vector<int32_t>> outputs;
  int64_t preemptions = 0;
  auto admitted = run_all(sched, model, &outputs, &preemptions);
  EXPECT_EQ(admitted, (std::vector<std::string>{"m2", "p1", "p1b", "p3", "p5"}));
  EXPECT_EQ(outputs, expected);
}

TEST(SchedulerPolicy, FcfsAdmitsInArrivalOrder) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 1;
  Scheduler sched(cfg, {64, 4, true});
  FakeModel model(64, 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sched.add_request(request(fmt::format("r{}", i), tokens(5, 10 * i + 1), 2, 0)).ok());
  std::map<std::string, std::vector<int32_t>> outputs;
  int64_t preemptions = 0;
  EXPECT_EQ(run_all(sched, model, &outputs, &preemptions), (std::vector<std::string>{"r0", "r1", "r2", "r3"}));
}

TEST(SchedulerPolicy, PreemptsTheLowestPriorityEvenIfScheduledEarlierInTheStep) {
  // 4 blocks of 2 tokens. "low" arrives (and is admitted) first, "high" second;
  // both grow until one must go: FCFS would preempt "high" (the latest), the
  // priority policy preempts "low", which was already scheduled in that step.
  Scheduler sched({}, {4, 2, false}, std::make_shared<PriorityPolicy>());
  ASSERT_TRUE(sched.add_request(request("low", tokens(3), 5, 10)).ok());
  ASSERT_TRUE(sched.add_request(request("high", tokens(3, 20), 5, 0)).ok());
  FakeModel model(4, 2);
  std::map<std::string, std::vector<int32_t>> outputs;
  bool saw_preemption = false;
  for (int step = 0; step < 50 && sched.has_unfinished_requests(); ++step) {
    SchedulerOutput out = sched.schedule();
    if (!out.preempted_ids.empty() && !saw_preemption) {
      saw_preemption = true;
      EXPECT_EQ(out.preempted_ids, std::vector<std::string>{"low"});
      ASSERT_EQ(out.scheduled.size(), 1u);
      EXPECT_EQ(out.scheduled[0].request_id, "high");
      EXPECT_EQ(sched.find_request("low")->status(), RequestStatus::preempted);
      EXPECT_TRUE(sched.kv_cache().block_table("low").empty());
      EXPECT_LE(out.num_scheduled_tokens, sched.config().max_num_batched_tokens);
    }
    auto updates = sched.update_from_output(out, model.run(out));
    ASSERT_TRUE(updates.ok()) << updates.status().to_string();
    for (const auto& u : *updates) {
      auto& o = outputs[u.request_id];
      o.insert(o.end(), u.new_token_ids.begin(), u.new_token_ids.end());
    }
    ASSERT_TRUE(sched.kv_cache().pool().check_invariants().ok());
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(outputs["low"], reference_output(tokens(3), 5));
  EXPECT_EQ(outputs["high"], reference_output(tokens(3, 20), 5));
}

TEST(SchedulerPolicy, RandomPrioritiesUnderATinyPoolStillGiveEveryRequestItsOwnOutput) {
  int64_t total_preemptions = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    SchedulerConfig cfg;
    cfg.max_num_batched_tokens = 8 + static_cast<int64_t>(rng() % 16);
    cfg.max_num_seqs = 2 + static_cast<int32_t>(rng() % 6);
    const int32_t num_blocks = 10, block_size = 4;
    Scheduler sched(cfg, {num_blocks, block_size, (seed % 2) == 0}, std::make_shared<PriorityPolicy>());
    FakeModel model(num_blocks, block_size);
    std::map<std::string, std::vector<int32_t>> expected;
    for (int i = 0; i < 10; ++i) {
      const std::string id = fmt::format("s{}r{}", seed, i);
      auto prompt = tokens(3 + static_cast<int>(rng() % 8), static_cast<int32_t>(50 * i + 1));
      const int64_t max_tokens = 2 + static_cast<int64_t>(rng() % 10);
      expected[id] = reference_output(prompt, max_tokens);
      ASSERT_TRUE(sched.add_request(request(id, prompt, max_tokens, static_cast<int32_t>(rng() % 4))).ok());
    }
    std::map<std::string, std::vector<int32_t>> outputs;
    int64_t preemptions = 0;
    run_all(sched, model, &outputs, &preemptions);
    EXPECT_EQ(outputs, expected) << "seed " << seed;
    EXPECT_DOUBLE_EQ(sched.kv_cache().usage(), 0.0);
    total_preemptions += preemptions;
  }
  EXPECT_GT(total_preemptions, 0) << "the pool is too large to test preemption";
}

}  // namespace
}  // namespace troupe::sched
