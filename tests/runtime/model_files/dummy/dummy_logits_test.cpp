// The dummy load format through the real CPU platform plugin: every weight
// type gives finite, non-constant logits; the same seed gives the same logits
// (after the in-memory model was dropped and rebuilt), another seed others;
// and the GGUF file `troupe make-gguf` writes gives bit-identical logits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/greedy_steps.hpp"

namespace troupe {
namespace {

EngineConfig dummy_config(const std::string& shape, const std::string& type, uint64_t seed) {
  EngineConfig c;
  c.parallel.num_threads = 2;
  c.model.load_format = "dummy";
  c.model.model_shape = shape;
  c.model.weight_type = type;
  c.model.seed = seed;
  c.model.max_model_len = 64;
  return c;
}

// Logits of the last token after a prefill of `ids`, then of one decode step.
std::vector<float> logits(generation::OfflineGenerator& gen, const std::vector<int32_t>& ids) {
  const int n = static_cast<int>(ids.size());
  std::vector<float> all = troupe::testing::prefill_logits(gen, ids);
  if (all.empty()) return {};
  ExecuteModelRequest step;
  step.batch.token_ids = {ids.front()};
  step.batch.positions = {n};
  step.batch.slot_mapping = {n};
  step.batch.query_start = {0, 1};
  step.batch.seq_lens = {n + 1};
  step.batch.block_tables = {{0, 1, 2, 3}};
  step.batch.logits_indices = {0};
  auto out = gen.worker().execute_model(step);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (out.ok()) all.insert(all.end(), out->logits.begin(), out->logits.end());
  return all;
}

std::vector<float> run(const EngineConfig& config, const std::string& path = "") {
  Platform* platform = testing::cpu_platform();
  EXPECT_NE(platform, nullptr);
  if (!platform) return {};
  auto gen = generation::OfflineGenerator::create(*platform, config, path);
  EXPECT_TRUE(gen.ok()) << gen.status().to_string();
  if (!gen.ok()) return {};
  const auto ids = (*gen)->tokenizer().encode("Once upon a time", true, false);
  return logits(**gen, ids);
}

TEST(DummyLogits, EveryWeightTypeGivesFiniteVaryingLogits) {
  for (DType type : dummy::dummy_weight_types()) {
    const std::string name(to_string(type));
    SCOPED_TRACE(name);
    const auto l = run(dummy_config("tiny", name, 1));
    ASSERT_EQ(l.size(), 2u * 512);
    double lo = l[0], hi = l[0];
    for (float v : l) {
      ASSERT_TRUE(std::isfinite(v));
      lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
    }
    EXPECT_GT(hi - lo, 0.1);  // not a constant row
    EXPECT_LT(hi - lo, 100.0);
  }
}

TEST(DummyLogits, SameSeedSameLogitsOtherSeedOthers) {
  const auto a = run(dummy_config("stories260k", "f16", 42));  // the model is dropped after each run
  const auto b = run(dummy_config("stories260k", "f16", 42));
  const auto c = run(dummy_config("stories260k", "f16", 43));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(DummyLogits, TheWrittenGgufGivesBitIdenticalLogits) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tiny", "q4_1"}, {"tiny", "q8_0"}, {"stories260k", "f32"}};
  for (const auto& [shape, type] : cases) {
    SCOPED_TRACE(shape + " " + type);
    auto spec = dummy::make_dummy_spec(shape, type, 9);
    ASSERT_TRUE(spec.ok());
    auto builder = dummy::dummy_gguf(*spec);
    ASSERT_TRUE(builder.ok());
    const std::string path = "/tmp/troupe_dummy_logits_" + std::to_string(::getpid()) + "_" + type + ".gguf";
    ASSERT_TRUE(builder->write_file(path).ok());
    EngineConfig from_file;
    from_file.parallel.num_threads = 2;
    from_file.model.max_model_len = 64;
    const auto disk = run(from_file, path);
    const auto memory = run(dummy_config(shape, type, 9));
    std::remove(path.c_str());
    ASSERT_FALSE(memory.empty());
    EXPECT_EQ(disk, memory);
  }
}

TEST(DummyLogits, ErrorsNameTheValidChoices) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  auto gen = generation::OfflineGenerator::create(*platform, dummy_config("llama-9b", "", 0), "");
  ASSERT_FALSE(gen.ok());
  EXPECT_NE(gen.status().message().find("llama-3.2-1b"), std::string::npos) << gen.status().message();
  auto with_path = generation::OfflineGenerator::create(*platform, dummy_config("tiny", "", 0),
                                                        std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf");
  ASSERT_FALSE(with_path.ok());
  EXPECT_NE(with_path.status().message().find("no model path"), std::string::npos) << with_path.status().message();
}

}  // namespace
}  // namespace troupe
