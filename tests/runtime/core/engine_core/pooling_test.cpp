// pool(): mean, CLS and last-token pooling, normalization, matryoshka dimensions.
#include "runtime/rank/runner/pooling.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace troupe::engine {
namespace {

const std::vector<float> kHidden = {1, 2, 3,   // token 0
                                    3, 4, 5,   // token 1
                                    5, 0, -2};  // token 2

std::vector<float> run(PoolingParams p, PoolingDefaults d = {}) {
  std::vector<float> out;
  auto s = pool(kHidden.data(), 3, 3, p, d, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

TEST(Pooling, MeanClsLast) {
  EXPECT_EQ(run({PoolingType::mean, false, std::nullopt}), (std::vector<float>{3, 2, 2}));
  EXPECT_EQ(run({PoolingType::cls, false, std::nullopt}), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(run({PoolingType::last, false, std::nullopt}), (std::vector<float>{5, 0, -2}));
  PoolingDefaults mean_default{PoolingType::mean, false, false};
  EXPECT_EQ(run({}, mean_default), (std::vector<float>{3, 2, 2}));
}

TEST(Pooling, NormalizeGivesAUnitVector) {
  auto v = run({PoolingType::cls, true, std::nullopt});
  double n = 0;
  for (float x : v) n += x * x;
  EXPECT_NEAR(n, 1.0, 1e-6);
  EXPECT_NEAR(v[0], 1 / std::sqrt(14.0), 1e-6);
  PoolingDefaults normalizing{PoolingType::mean, true, false};
  auto w = run({}, normalizing);
  EXPECT_NEAR(w[0], 3 / std::sqrt(17.0), 1e-6);
  auto raw = run({std::nullopt, false, std::nullopt}, normalizing);  // the request overrides the default
  EXPECT_EQ(raw, (std::vector<float>{3, 2, 2}));
}

TEST(Pooling, DimensionsOnlyForMatryoshkaModels) {
  std::vector<float> out;
  EXPECT_EQ(pool(kHidden.data(), 3, 3, {PoolingType::mean, false, 2}, {}, &out).code(), StatusCode::invalid_argument);
  PoolingDefaults m{PoolingType::mean, false, true};
  ASSERT_TRUE(pool(kHidden.data(), 3, 3, {PoolingType::mean, false, 2}, m, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{3, 2}));
  EXPECT_FALSE(pool(kHidden.data(), 3, 3, {PoolingType::mean, false, 4}, m, &out).ok());
  EXPECT_FALSE(pool(kHidden.data(), 0, 3, {}, m, &out).ok());
}

TEST(Pooling, ParseType) {
  EXPECT_EQ(*parse_pooling_type("mean"), PoolingType::mean);
  EXPECT_EQ(*parse_pooling_type("CLS"), PoolingType::cls);
  EXPECT_EQ(parse_pooling_type("max").status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace troupe::engine
