// Extension slots: optional worker features found by name, not by new virtuals.
#include <gtest/gtest.h>

#include "troupe/extensions.hpp"

namespace troupe {
namespace {

// The Worker contract answered minimally; what differs between the two is the extension.
class PlainWorker : public Worker {
 public:
  PlainWorker() : Worker("plain") {}
  Status init_device() override { return {}; }
  Status load_model(const ModelSource&) override { return {}; }
  Result<KvCacheSpec> get_kv_cache_spec() const override { return KvCacheSpec{}; }
  Result<int64_t> determine_available_memory() override { return int64_t{0}; }
  Status initialize_from_config(const KvCacheConfig&) override { return {}; }
  Status compile_or_warm_up_model() override { return {}; }
  Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest&) override { return ModelRunnerOutput{}; }
  const ModelInfo* model_info() const override { return nullptr; }
};

// Sleeps for real in the only sense a host-memory worker can: it tracks what it dropped.
class SleepyWorker final : public PlainWorker, public SleepModeExtension {
 public:
  Status sleep(int level) override {
    if (level != 1 && level != 2) return invalid_argument("sleep level must be 1 or 2");
    asleep_ = true;
    return {};
  }
  Status wake_up(const std::vector<std::string>&) override {
    if (!asleep_) return invalid_argument("not asleep");
    asleep_ = false;
    return {};
  }
  void* get_extension(std::string_view name) override {
    if (name == SleepModeExtension::kName) return static_cast<SleepModeExtension*>(this);
    return PlainWorker::get_extension(name);
  }
  bool asleep() const { return asleep_; }

 private:
  bool asleep_ = false;
};

TEST(Extensions, AWorkerWithoutAnExtensionAnswersNull) {
  PlainWorker w;
  EXPECT_EQ(find_extension<SleepModeExtension>(w), nullptr);
  EXPECT_EQ(find_extension<LoraExtension>(w), nullptr);
  EXPECT_EQ(find_extension<DraftTokensExtension>(w), nullptr);
  auto lora = require_extension<LoraExtension>(w, "LoRA");
  ASSERT_FALSE(lora.ok());
  EXPECT_EQ(lora.status().code(), StatusCode::not_supported);
  EXPECT_EQ(lora.status().message(), "LoRA is not supported by platform plain (its worker has no troupe.lora.v2 extension)");
}

TEST(Extensions, AnImplementedExtensionIsFoundAndCalledThrough) {
  SleepyWorker w;
  Worker& base = w;  // the engine only holds a Worker
  auto* sleep = find_extension<SleepModeExtension>(base);
  ASSERT_NE(sleep, nullptr);
  EXPECT_TRUE(sleep->sleep(1).ok());
  EXPECT_TRUE(w.asleep());
  EXPECT_EQ(sleep->sleep(3).code(), StatusCode::invalid_argument);
  EXPECT_TRUE(sleep->wake_up({}).ok());
  EXPECT_FALSE(w.asleep());
  // Only what it implements: the other slots stay empty.
  EXPECT_EQ(find_extension<LoraExtension>(base), nullptr);
  EXPECT_EQ(find_extension<DraftTokensExtension>(base), nullptr);
}

}  // namespace
}  // namespace troupe
