// StepStats: one step's structs as the SDK's StepStatsView, the names plugins read,
// and PluginStatLogger feeding a plugin's StatLogger.
#include "runtime/core/stats/step_stats_view.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "runtime/core/stats/engine_stat_logger.hpp"

namespace troupe::stats {
namespace {

SchedulerStats scheduler_stats() {
  SchedulerStats s;
  s.step = 41;
  s.num_running_reqs = 3;
  s.num_waiting_reqs = 2;
  s.kv_cache_usage = 0.25;
  s.prefix_cache_queries = 100;
  s.prefix_cache_hits = 60;
  s.num_preempted_reqs = 1;
  s.num_scheduled_tokens = 77;
  s.step_seconds = 0.5;
  s.model_seconds = 0.4;
  s.communicator_bytes = 4096;
  s.communicator_seconds = 0.01;
  s.sleep_level = 1;
  s.spec_decoding.num_drafts = 4;
  s.spec_decoding.num_draft_tokens = 12;
  s.spec_decoding.num_accepted_tokens = 9;
  s.spec_decoding.num_accepted_tokens_per_pos = {4, 3, 2};
  return s;
}

IterationStats iteration_stats() {
  IterationStats it;
  it.num_prompt_tokens = 50;
  it.num_generation_tokens = 6;
  it.time_to_first_tokens_s = {0.1, 0.2};
  it.inter_token_latencies_s = {0.03};
  FinishedRequestStats f;
  f.request_id = "req-1";
  f.finish_reason = "length";
  f.num_prompt_tokens = 10;
  f.num_generation_tokens = 5;
  f.e2e_latency_s = 1.5;
  f.time_to_first_token_s = 0.2;
  it.finished_requests.push_back(f);
  return it;
}

TEST(StepStatsView, NumbersSeriesAndFinishedRequestsByName) {
  const SchedulerStats s = scheduler_stats();
  const IterationStats it = iteration_stats();
  const StepStats view(&s, &it);
  EXPECT_EQ(view.number("step"), 41.0);
  EXPECT_EQ(view.number("num_running_reqs"), 3.0);
  EXPECT_EQ(view.number("num_waiting_reqs"), 2.0);
  EXPECT_EQ(view.number("kv_cache_usage"), 0.25);
  EXPECT_EQ(view.number("prefix_cache_queries"), 100.0);
  EXPECT_EQ(view.number("prefix_cache_hits"), 60.0);
  EXPECT_EQ(view.number("num_preempted_reqs"), 1.0);
  EXPECT_EQ(view.number("num_scheduled_tokens"), 77.0);
  EXPECT_EQ(view.number("step_seconds"), 0.5);
  EXPECT_EQ(view.number("model_seconds"), 0.4);
  EXPECT_EQ(view.number("communicator_bytes"), 4096.0);
  EXPECT_EQ(view.number("communicator_seconds"), 0.01);
  EXPECT_EQ(view.number("sleep_level"), 1.0);
  EXPECT_EQ(view.number("spec_decoding.num_drafts"), 4.0);
  EXPECT_EQ(view.number("spec_decoding.num_draft_tokens"), 12.0);
  EXPECT_EQ(view.number("spec_decoding.num_accepted_tokens"), 9.0);
  EXPECT_EQ(view.number("num_prompt_tokens"), 50.0);
  EXPECT_EQ(view.number("num_generation_tokens"), 6.0);
  EXPECT_FALSE(view.number("no_such_number").has_value());
  const auto names = view.number_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.size(), 19u);  // with structured_output_bytes
  for (const auto& name : names) EXPECT_TRUE(view.number(name).has_value()) << name;

  EXPECT_EQ(view.series("time_to_first_tokens_s"), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(view.series("inter_token_latencies_s"), (std::vector<double>{0.03}));
  EXPECT_EQ(view.series("spec_decoding.num_accepted_tokens_per_pos"), (std::vector<double>{4, 3, 2}));
  EXPECT_TRUE(view.series("no_such_series").empty());

  ASSERT_EQ(view.num_finished_requests(), 1);
  EXPECT_EQ(view.finished_text(0, "request_id"), "req-1");
  EXPECT_EQ(view.finished_text(0, "finish_reason"), "length");
  EXPECT_EQ(view.finished_number(0, "num_generation_tokens"), 5.0);
  EXPECT_EQ(view.finished_number(0, "e2e_latency_s"), 1.5);
  EXPECT_EQ(view.finished_number(0, "time_to_first_token_s"), 0.2);
  EXPECT_FALSE(view.finished_number(1, "e2e_latency_s").has_value());
  EXPECT_EQ(view.finished_text(-1, "request_id"), "");
}

TEST(StepStatsView, AnAbsentHalfHasNoNames) {
  const SchedulerStats s = scheduler_stats();
  const StepStats only_scheduler(&s, nullptr);
  EXPECT_TRUE(only_scheduler.number("step").has_value());
  EXPECT_FALSE(only_scheduler.number("num_prompt_tokens").has_value());
  EXPECT_EQ(only_scheduler.num_finished_requests(), 0);
  EXPECT_TRUE(only_scheduler.series("time_to_first_tokens_s").empty());
  const StepStats neither(nullptr, nullptr);
  EXPECT_TRUE(neither.number_names().empty());
}

// A plugin's logger sees what the engine's struct-based interface was given.
class RecordingPlugin final : public StatLogger {
 public:
  void record(const StepStatsView& step, int engine_index) override {
    running = step.number("num_running_reqs").value_or(-1);
    finished = step.num_finished_requests();
    engine = engine_index;
  }
  void log() override { ++logs; }
  void log_engine_initialized() override { initialized = true; }
  double running = 0;
  int64_t finished = 0;
  int engine = -1, logs = 0;
  bool initialized = false;
};

TEST(PluginStatLogger, FeedsThePluginAView) {
  auto plugin = std::make_unique<RecordingPlugin>();
  RecordingPlugin* seen = plugin.get();
  PluginStatLogger logger(std::move(plugin));
  const SchedulerStats s = scheduler_stats();
  const IterationStats it = iteration_stats();
  logger.log_engine_initialized();
  logger.record(&s, &it, 3);
  logger.log();
  EXPECT_TRUE(seen->initialized);
  EXPECT_EQ(seen->running, 3.0);
  EXPECT_EQ(seen->finished, 1);
  EXPECT_EQ(seen->engine, 3);
  EXPECT_EQ(seen->logs, 1);
}

}  // namespace
}  // namespace troupe::stats
