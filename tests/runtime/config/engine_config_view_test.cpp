// EngineConfig as the SDK's ConfigEditor: every setting by name, round trips,
// refusals, and the typed settings the model runner library reads from a view.
#include "runtime/config/engine_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "troupe/model_runner/settings.hpp"

namespace troupe {
namespace {

TEST(EngineConfigView, KeysAreSortedUniqueAndEachReadsBack) {
  EngineConfig config;
  config.extra["vendor_flag"] = "on";
  const auto keys = config.keys();
  ASSERT_GT(keys.size(), 30u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  for (const auto& key : keys) {
    auto value = config.get(key);
    ASSERT_TRUE(value.has_value()) << key;
    // Setting a value to its own text changes nothing.
    EngineConfig copy = config;
    ASSERT_TRUE(copy.set(key, *value).ok()) << key << " = " << *value;
    EXPECT_EQ(copy.get(key), value) << key;
  }
  EXPECT_EQ(config.get("extra.vendor_flag"), "on");
  EXPECT_FALSE(config.get("cache.no_such_setting").has_value());
  EXPECT_FALSE(config.get("extra.absent").has_value());
}

TEST(EngineConfigView, SetWritesTheFieldsAndRefusesWhatItCannotParse) {
  EngineConfig config;
  ASSERT_TRUE(config.set("cache.block_size", "32").ok());
  ASSERT_TRUE(config.set("cache.memory_utilization", "0.5").ok());
  ASSERT_TRUE(config.set("compilation.enforce_eager", "true").ok());
  ASSERT_TRUE(config.set("parallel.worker_cls", "vendor.Worker").ok());
  ASSERT_TRUE(config.set("model.logits_processors", "a,b").ok());
  ASSERT_TRUE(config.set("model.seed", "18446744073709551615").ok());
  ASSERT_TRUE(config.set("extra.vendor_flag", "x").ok());
  EXPECT_EQ(config.cache.block_size, 32);
  EXPECT_DOUBLE_EQ(config.cache.memory_utilization, 0.5);
  EXPECT_TRUE(config.compilation.enforce_eager);
  EXPECT_EQ(config.parallel.worker_cls, "vendor.Worker");
  EXPECT_EQ(config.model.logits_processors, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(config.model.seed, UINT64_MAX);
  EXPECT_EQ(config.extra.at("vendor_flag"), "x");
  EXPECT_EQ(config.get_list("model.logits_processors"), (std::vector<std::string>{"a", "b"}));

  const EngineConfig before = config;
  for (auto [key, value] : {std::pair{"cache.block_size", "16x"}, {"cache.block_size", ""},
                            {"cache.block_size", "99999999999"}, {"compilation.enforce_eager", "yes"},
                            {"cache.memory_utilization", "nan"}, {"cache.memory_utilization", "0.5.1"}}) {
    Status s = config.set(key, value);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << key << " = " << value;
    EXPECT_NE(s.message().find(key), std::string::npos) << s.message();
  }
  Status unknown = config.set("cache.blocksize", "16");
  EXPECT_EQ(unknown.code(), StatusCode::invalid_argument);
  EXPECT_NE(unknown.message().find("no setting named 'cache.blocksize'"), std::string::npos) << unknown.message();
  EXPECT_EQ(config.set("extra.", "x").code(), StatusCode::invalid_argument);
  EXPECT_EQ(config.keys(), before.keys());
  for (const auto& key : before.keys()) EXPECT_EQ(config.get(key), before.get(key)) << key;
}

TEST(EngineConfigView, ParallelConfigIsAViewOfItsOwnNames) {
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  p.communicator_host = "10.0.0.1";
  for (const auto& key : p.keys()) EXPECT_EQ(key.rfind("parallel.", 0), 0u) << key;
  EXPECT_EQ(p.get_int("parallel.tensor_parallel_size"), 2);
  EXPECT_EQ(p.get_string("parallel.communicator_host"), "10.0.0.1");
  EXPECT_FALSE(p.get("cache.block_size").has_value());
  EngineConfig config;
  config.parallel = p;
  for (const auto& key : p.keys()) EXPECT_EQ(p.get(key), config.get(key)) << key;
}

TEST(EngineConfigView, ConfigValuesCopiesAView) {
  EngineConfig config;
  config.cache.block_size = 64;
  config.extra["x"] = "y";
  ConfigValues copy(config);
  EXPECT_EQ(copy.keys(), config.keys());
  for (const auto& key : config.keys()) EXPECT_EQ(copy.get(key), config.get(key)) << key;
  EXPECT_EQ(copy.get_int("cache.block_size"), 64);
  // Typed getters fall back on absent names and unparsable text.
  EXPECT_EQ(copy.get_int("no.such", 7), 7);
  EXPECT_EQ(copy.get_int("model.model_path", 9), 9);
  EXPECT_FALSE(copy.get_bool("no.such"));
  EXPECT_EQ(copy.get_string("no.such", "z"), "z");
}

// The model runner library reads settings by the names the engine publishes: each typed
// field equals the engine's struct, at the defaults and changed.
TEST(EngineConfigView, RunnerSettingsReadTheEnginesNames) {
  for (bool changed : {false, true}) {
    EngineConfig c;
    if (changed) {
      c.parallel.tensor_parallel_size = 2;
      c.parallel.pipeline_parallel_size = 3;
      c.parallel.communicator_id = "cpu-shm:h:t";
      c.parallel.communicator_host = "h";
      c.parallel.num_threads = 5;
      c.parallel.worker_cls = "w";
      c.cache.block_size = 32;
      c.cache.cache_dtype = "float32";
      c.cache.kv_cache_memory_bytes = 12345;
      c.cache.memory_utilization = 0.25;
      c.scheduler.max_num_batched_tokens = 99;
      c.scheduler.max_num_seqs = 7;
      c.model.max_model_len = 4096;
      c.model.runner = "pooling";
      c.lora.enable_lora = true;
      c.lora.max_lora_rank = 64;
      c.compilation.enforce_eager = true;
    }
    const RunnerSettings s = RunnerSettings::from(c);
    SCOPED_TRACE(changed ? "changed" : "defaults");
    EXPECT_EQ(s.parallel.tensor_parallel_size, c.parallel.tensor_parallel_size);
    EXPECT_EQ(s.parallel.pipeline_parallel_size, c.parallel.pipeline_parallel_size);
    EXPECT_EQ(s.parallel.communicator_id, c.parallel.communicator_id);
    EXPECT_EQ(s.parallel.communicator_host, c.parallel.communicator_host);
    EXPECT_EQ(s.parallel.num_threads, c.parallel.num_threads);
    EXPECT_EQ(s.parallel.worker_cls, c.parallel.worker_cls);
    EXPECT_EQ(s.cache.block_size, c.cache.block_size);
    EXPECT_EQ(s.cache.cache_dtype, c.cache.cache_dtype);
    EXPECT_EQ(s.cache.kv_cache_memory_bytes, c.cache.kv_cache_memory_bytes);
    EXPECT_DOUBLE_EQ(s.cache.memory_utilization, c.cache.memory_utilization);
    EXPECT_EQ(s.max_num_batched_tokens, c.scheduler.max_num_batched_tokens);
    EXPECT_EQ(s.max_num_seqs, c.scheduler.max_num_seqs);
    EXPECT_EQ(s.max_model_len, c.model.max_model_len);
    EXPECT_EQ(s.runner, c.model.runner);
    EXPECT_EQ(s.enable_lora, c.lora.enable_lora);
    EXPECT_EQ(s.max_lora_rank, c.lora.max_lora_rank);
    EXPECT_EQ(s.enforce_eager, c.compilation.enforce_eager);
  }
  // An empty view (the conformance kit's) gives the engine's defaults.
  const RunnerSettings empty = RunnerSettings::from(ConfigValues{});
  const RunnerSettings defaults = RunnerSettings::from(EngineConfig{});
  EXPECT_EQ(empty.cache.block_size, defaults.cache.block_size);
  EXPECT_DOUBLE_EQ(empty.cache.memory_utilization, defaults.cache.memory_utilization);
  EXPECT_EQ(empty.max_num_batched_tokens, defaults.max_num_batched_tokens);
  EXPECT_EQ(empty.max_num_seqs, defaults.max_num_seqs);
  EXPECT_EQ(empty.max_lora_rank, defaults.max_lora_rank);
  EXPECT_EQ(empty.runner, defaults.runner);
  EXPECT_EQ(empty.parallel.world_size(), 1);
}

}  // namespace
}  // namespace troupe
