// The device's token selection (Ops::select_tokens, reference kernel
// kernels/cpu/token_select) against the host sampler: for the rows
// sampling::device_selection hands to the device (greedy, or top_p < 1 with the
// step's draw) they choose the same token; rows with penalties or logprobs stay
// on the host.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/token_select.hpp"
#include "runtime/rank/sampling/sampler.hpp"

namespace troupe::sampling {
namespace {

int32_t on_device(const std::vector<float>& logits, const TokenSelection& t) {
  std::vector<float> probs;
  std::vector<int32_t> order;
  return kernels::cpu::select_token(logits.data(), static_cast<int64_t>(logits.size()), t.temperature, t.top_p,
                                    t.min_p, t.top_k, t.u, probs, order);
}

TEST(DeviceSelectionTest, SameTokenAsTheHostSamplerForGreedyAndTopP) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Case { float temperature, top_p, min_p; int32_t top_k; };
  const Case cases[] = {{0, 1, 0, 0}, {0.8f, 0.9f, 0, 0}, {1.0f, 0.5f, 0, 20}, {1.3f, 0.95f, 0.01f, 0},
                        {0.6f, 0.99f, 0.2f, 5}};
  int sampled_other_than_argmax = 0;
  for (int64_t vocab : {1, 2, 50, 4000})
    for (const Case& c : cases)
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> logits(static_cast<size_t>(vocab));
        for (float& l : logits) l = normal(rng);
        if (trial % 4 == 0)
          for (float& l : logits) l = std::round(l);  // ties
        SamplingParams p;
        p.temperature = c.temperature;
        p.top_p = c.top_p;
        p.min_p = c.min_p;
        p.top_k = c.top_k;
        const uint64_t seed = derive_step_seed(1000 + trial, static_cast<uint64_t>(vocab));
        auto sel = device_selection(p, 0, seed);
        ASSERT_TRUE(sel.has_value());
        const int32_t host = sample(logits.data(), vocab, p, {}, {}, seed).token;
        const int32_t device = on_device(logits, *sel);
        EXPECT_EQ(device, host) << "vocab " << vocab << " T " << c.temperature << " top_p " << c.top_p << " trial "
                                << trial;
        SamplingParams greedy;
        greedy.temperature = 0;
        if (device != sample(logits.data(), vocab, greedy, {}, {}, 0).token) ++sampled_other_than_argmax;
      }
  EXPECT_GT(sampled_other_than_argmax, 100);  // the random rows really drew
}

TEST(DeviceSelectionTest, TopPOfOneDrawsFromTheSameDistribution) {
  // With top_p 1 the host walks ids in index order and the device in probability order: the
  // tokens differ for one u, the frequencies do not.
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 0.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  std::vector<int> host(4), device(4);
  for (uint64_t i = 0; i < 20000; ++i) {
    const uint64_t seed = derive_step_seed(i, 0);
    ++host[static_cast<size_t>(sample(logits.data(), 4, p, {}, {}, seed).token)];
    ++device[static_cast<size_t>(on_device(logits, *device_selection(p, 0, seed)))];
  }
  double z = 0;
  for (float l : logits) z += std::exp(l);
  for (size_t t = 0; t < 4; ++t) {
    const double want = 20000 * std::exp(logits[t]) / z;
    EXPECT_NEAR(host[t], want, 5 * std::sqrt(want)) << t;
    EXPECT_NEAR(device[t], want, 5 * std::sqrt(want)) << t;
  }
}

TEST(DeviceSelectionTest, RowsNeedingTheLogitsStayOnTheHost) {
  SamplingParams p;
  EXPECT_TRUE(device_selection(p, 0, 1).has_value());
  auto with = [](auto mutate, size_t num_output = 0) {
    SamplingParams q;
    mutate(q);
    return device_selection(q, num_output, 1).has_value();
  };
  EXPECT_FALSE(with([](SamplingParams& q) { q.logprobs = 0; }));
  EXPECT_FALSE(with([](SamplingParams& q) { q.repetition_penalty = 1.1f; }));
  EXPECT_FALSE(with([](SamplingParams& q) { q.presence_penalty = 0.5f; }));
  EXPECT_FALSE(with([](SamplingParams& q) { q.frequency_penalty = -0.5f; }));
  EXPECT_FALSE(with([](SamplingParams& q) { q.logit_bias = {{3, 1.0f}}; }));
  EXPECT_FALSE(with([](SamplingParams& q) { q.allowed_token_ids = {3}; }));
  EXPECT_FALSE(with([](SamplingParams& q) { q.bad_words_token_ids = {{3}}; }));
  // min_tokens needs the host only until it is reached.
  EXPECT_FALSE(with([](SamplingParams& q) { q.min_tokens = 2; }, 1));
  EXPECT_TRUE(with([](SamplingParams& q) { q.min_tokens = 2; }, 2));
  EXPECT_TRUE(with([](SamplingParams& q) { q.stop = {"x"}; q.max_tokens = 3; q.seed = 5; }));
  // Greedy rows carry no draw; random rows carry the host's.
  SamplingParams g;
  g.temperature = 0;
  EXPECT_EQ(device_selection(g, 0, 99)->temperature, 0.0f);
  EXPECT_EQ(device_selection(p, 0, 99)->u, uniform01(99));
}

// Below ~2.9e-39 the inverse temperature overflows, and exp((l - max) / T) would give the
// maximum 0 x inf = NaN: such a temperature is the greedy limit on the host sampler, in its
// device selection and in the reference kernel alike.
TEST(DeviceSelectionTest, ATemperatureWhoseInverseOverflowsIsGreedy) {
  const std::vector<float> logits = {0.5f, -1.0f, 3.0f, 2.9f, 3.0f - 1e-6f};
  for (float t : {1e-39f, 2e-39f, std::numeric_limits<float>::denorm_min()}) {
    SCOPED_TRACE(t);
    ASSERT_TRUE(std::isinf(1.0f / t));
    SamplingParams p;
    p.temperature = t;
    p.top_p = 0.9f;
    EXPECT_TRUE(p.validate().ok());
    EXPECT_TRUE(p.greedy());
    for (uint64_t seed : {1u, 2u, 3u}) EXPECT_EQ(sample(logits.data(), 5, p, {}, {}, seed).token, 2);
    auto sel = device_selection(p, 0, 7);
    ASSERT_TRUE(sel.has_value());
    EXPECT_EQ(on_device(logits, *sel), 2);
    TokenSelection raw;  // the reference kernel given the tiny temperature itself
    raw.temperature = t;
    raw.u = 0.99;
    EXPECT_EQ(on_device(logits, raw), 2);
  }
  SamplingParams small;  // the smallest temperatures whose inverse is finite still sample
  small.temperature = 1e-30f;
  EXPECT_FALSE(small.greedy());
}

}  // namespace
}  // namespace troupe::sampling
