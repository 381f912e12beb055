// plan_kv_cache: blocks every rank can hold, overrides, and the model length.
#include "runtime/config/engine_config.hpp"
#include "runtime/core/engine_core/kv_cache_plan.hpp"

#include <gtest/gtest.h>

namespace troupe::engine {
namespace {

KvSizing rank(int64_t available, int layers = 4) {
  KvSizing s;
  s.spec.block_size = 16;
  s.spec.num_layers = layers;
  s.spec.num_kv_heads = 2;
  s.spec.head_dim = 8;
  s.spec.dtype = DType::f32;
  s.available_bytes = available;
  return s;
}

TEST(KvCachePlan, TheSmallestRankDecides) {
  const int64_t per_block = rank(0).spec.bytes_per_block();
  ASSERT_EQ(per_block, 2 * 4 * 16 * 2 * 8 * 4);
  EngineConfig config;
  auto plan = plan_kv_cache({rank(100 * per_block), rank(40 * per_block + 7), rank(70 * per_block)}, config, 256);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->num_blocks, 40);
  EXPECT_EQ(plan->capacity_tokens(), 640);
  EXPECT_EQ(plan->max_model_len, 256);  // the model's context
}

TEST(KvCachePlan, OverrideWinsAndTheModelLengthShrinksToTheCache) {
  EngineConfig config;
  config.cache.num_gpu_blocks_override = 10;
  config.model.max_model_len = 4096;
  auto plan = plan_kv_cache({rank(1)}, config, 8192);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_blocks, 10);
  EXPECT_EQ(plan->max_model_len, 160);
}

TEST(KvCachePlan, TheModelLengthNeverExceedsTheContext) {
  EngineConfig config;
  config.model.max_model_len = 4096;
  auto plan = plan_kv_cache({rank(int64_t{1} << 30)}, config, 2048);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->max_model_len, 2048);
  auto no_context = plan_kv_cache({rank(int64_t{1} << 30)}, EngineConfig{}, 0);
  ASSERT_TRUE(no_context.ok());
  EXPECT_EQ(no_context->max_model_len, 2048);
}

TEST(KvCachePlan, ErrorsSayWhy) {
  EngineConfig config;
  auto none = plan_kv_cache({}, config, 128);
  EXPECT_EQ(none.status().code(), StatusCode::invalid_argument);
  auto tiny = plan_kv_cache({rank(100)}, config, 128);
  EXPECT_EQ(tiny.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(tiny.status().message().find("one block needs"), std::string::npos) << tiny.status().message();
  auto mismatch = plan_kv_cache({rank(1 << 20, 4), rank(1 << 20, 5)}, config, 128);
  EXPECT_EQ(mismatch.status().code(), StatusCode::internal);
  EXPECT_NE(mismatch.status().message().find("rank 1"), std::string::npos);
}

// Pipeline stages hold different numbers of layers: each rank's blocks are its own size,
// and the rank that fits the fewest blocks decides.
TEST(KvCachePlan, PipelineStagesMayHoldDifferentLayers) {
  EngineConfig config;
  config.parallel.pipeline_parallel_size = 2;
  const int64_t per3 = rank(0, 3).spec.bytes_per_block(), per2 = rank(0, 2).spec.bytes_per_block();
  auto plan = plan_kv_cache({rank(30 * per3, 3), rank(40 * per2, 2)}, config, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->num_blocks, 30);
  EXPECT_EQ(plan->spec.num_layers, 3);  // rank 0's spec
  auto fewer = plan_kv_cache({rank(30 * per3, 3), rank(20 * per2, 2)}, config, 1 << 20);
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->num_blocks, 20);
  KvSizing other_heads = rank(1 << 20, 2);
  other_heads.spec.num_kv_heads = 1;
  EXPECT_EQ(plan_kv_cache({rank(1 << 20, 3), other_heads}, config, 128).status().code(), StatusCode::internal);
}

}  // namespace
}  // namespace troupe::engine
