// Sleep mode on the worker (SleepModeExtension of the SDK's ModelRunnerWorker),
// on the real CPU platform with stories260K: a sleeping worker refuses steps,
// waking restores it, and the logits after waking equal those before bit for
// bit, at both levels and when woken in parts.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/config/engine_config.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/loaded_worker.hpp"
#include "troupe/extensions.hpp"

namespace troupe {
namespace {

using testing::BatchPart;

class SleepModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Platform* cpu = testing::cpu_platform();
    ASSERT_NE(cpu, nullptr);
    runtime::register_builtin_models();
    EngineConfig config;
    config.parallel.num_threads = 2;
    config.scheduler.max_num_batched_tokens = 64;
    auto w = testing::load_worker(*cpu, config, testing::stories_path(), 8);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    w_ = std::move(*w);
    sleep_ = find_extension<SleepModeExtension>(*w_.worker);
    ASSERT_NE(sleep_, nullptr) << "the CPU worker offers sleep mode";
  }

  // A prompt of 6 tokens, then 3 greedy decode steps: every logits row.
  std::vector<std::vector<float>> generate() {
    std::vector<int32_t> ids = {1, 45, 67, 89, 12, 300};
    std::vector<std::vector<float>> rows = testing::run_step(w_, {{0, ids.data(), 6, 0, true}}, 16);
    for (int pos = 6; pos < 9 && !rows.empty(); ++pos) {
      const std::vector<float>& last = rows.back();
      ids.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
      auto next = testing::run_step(w_, {{0, &ids[pos], 1, pos, true}}, 16);
      if (next.empty()) break;
      rows.push_back(next[0]);
    }
    return rows;
  }

  static void expect_same(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0) << "row " << i;
  }

  testing::LoadedWorker w_;
  SleepModeExtension* sleep_ = nullptr;
};

TEST_F(SleepModeTest, EachLevelRefusesStepsWhileAsleepAndGivesTheSameLogitsAfterWaking) {
  const auto before = generate();
  for (int level : {1, 2}) {
    SCOPED_TRACE(level);
    ASSERT_TRUE(sleep_->sleep(level).ok());
    ExecuteModelRequest req;
    req.batch.token_ids = {1};
    req.batch.positions = {0};
    req.batch.slot_mapping = {0};
    req.batch.query_start = {0, 1};
    req.batch.seq_lens = {1};
    req.batch.block_tables = {{0}};
    req.batch.logits_indices = {0};
    auto refused = w_.worker->execute_model(req);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::unavailable);
    EXPECT_NE(refused.status().message().find("is asleep (sleep level " + std::to_string(level) + ")"),
              std::string::npos)
        << refused.status().message();
    ASSERT_TRUE(sleep_->wake_up({}).ok());
    expect_same(before, generate());
  }
}

TEST_F(SleepModeTest, WakingInPartsNeedsBothPartsAndBadInputIsAnError) {
  const auto before = generate();
  EXPECT_EQ(sleep_->sleep(3).code(), StatusCode::invalid_argument);
  ASSERT_TRUE(sleep_->sleep(1).ok());
  ASSERT_TRUE(sleep_->sleep(1).ok());  // again: a no-op
  EXPECT_EQ(sleep_->wake_up({"weights", "lora"}).code(), StatusCode::invalid_argument);
  ASSERT_TRUE(sleep_->wake_up({"weights"}).ok());
  auto half = w_.worker->compile_or_warm_up_model();
  EXPECT_EQ(half.code(), StatusCode::unavailable) << "the KV cache still sleeps";
  ASSERT_TRUE(sleep_->wake_up({"kv_cache"}).ok());
  expect_same(before, generate());
}

}  // namespace
}  // namespace troupe
