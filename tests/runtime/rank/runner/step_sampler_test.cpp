// StepSampler: the device's plan, tokens chosen on the device, and sampling (with
// draft verification and raw logprobs) from the host's logits.
#include "runtime/rank/runner/step_sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace troupe::engine {
namespace {

constexpr int64_t kVocab = 4;

SamplingState greedy(std::string id, int32_t logprobs = -1) {
  SamplingState s;
  s.request_id = std::move(id);
  s.params.temperature = 0;
  s.params.logprobs = logprobs;
  s.prompt_token_ids = {1};
  return s;
}

StepInput step(std::vector<std::string> ids, std::vector<std::vector<int32_t>> drafts = {}) {
  StepInput in;
  in.step = 7;
  in.sample_ids = std::move(ids);
  in.draft_token_ids = std::move(drafts);
  return in;
}

TEST(StepSampler, GreedyTokensAppendToEachRequest) {
  DriverRequests requests;
  requests.add(greedy("a"));
  requests.add(greedy("b"));
  const std::vector<float> logits = {0, 5, 1, 2,   // a: token 1
                                     3, 0, 0, 9};  // b: token 3
  StepSampler sampler(0);
  StepOutput out;
  ASSERT_TRUE(sampler.sample(step({"a", "b"}), logits.data(), nullptr, kVocab, requests, out).ok());
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0].token, 1);
  EXPECT_EQ(out.tokens[1].token, 3);
  EXPECT_TRUE(out.num_accepted.empty());
  EXPECT_EQ(requests.find("a")->output_token_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(requests.find("b")->output_token_ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(sampler.sample(step({"gone"}), logits.data(), nullptr, kVocab, requests, out).code(), StatusCode::internal);
}

TEST(StepSampler, VerifiesDrafts) {
  DriverRequests requests;
  requests.add(greedy("a"));
  requests.add(greedy("b"));
  // a drafts 2, 0, 1: row 0 picks 2 (accepted), row 1 picks 3 (0 rejected, 3 emitted, the
  // rest unread). b drafts nothing: one row, token 1.
  ModelRunnerOutput result;
  result.vocab_size = kVocab;
  result.logits = {0, 0, 9, 0,
                   0, 0, 0, 9,
                   0, 0, 0, 0,
                   9, 0, 0, 0,
                   0, 9, 0, 0};
  StepSampler sampler(0);
  StepOutput out;
  auto input = step({"a", "b"}, {{2, 0, 1}, {}});
  auto rows = sampler.logits_rows(input, result);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(*rows, 5u);
  ASSERT_TRUE(sampler.sample(input, result.logits.data(), nullptr, kVocab, requests, out).ok());
  EXPECT_EQ(out.num_accepted, (std::vector<int32_t>{1, 0}));
  ASSERT_EQ(out.tokens.size(), 3u);
  EXPECT_EQ(out.tokens[0].token, 2);
  EXPECT_EQ(out.tokens[1].token, 3);
  EXPECT_EQ(out.tokens[2].token, 1);
  EXPECT_EQ(requests.find("a")->output_token_ids, (std::vector<int32_t>{2, 3}));
}

TEST(StepSampler, LogprobsComeFromTheRawLogits) {
  DriverRequests requests;
  requests.add(greedy("a", /*logprobs=*/1));
  const std::vector<float> raw = {1, 2, 3, 4};
  const std::vector<float> masked = {1, 2, 3, -INFINITY};  // a mask took token 3 away
  StepSampler sampler(0);
  StepOutput out;
  ASSERT_TRUE(sampler.sample(step({"a"}), masked.data(), raw.data(), kVocab, requests, out).ok());
  ASSERT_EQ(out.tokens.size(), 1u);
  EXPECT_EQ(out.tokens[0].token, 2);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0));
  EXPECT_NEAR(out.tokens[0].logprob, 3 - lse, 1e-5);
  EXPECT_EQ(out.tokens[0].top_ids, (std::vector<int32_t>{3}));  // the model's best, masked or not
}

TEST(StepSampler, LogitsRowsChecksDraftsAndShape) {
  StepSampler sampler(2);
  ModelRunnerOutput result;
  result.vocab_size = kVocab;
  result.logits.assign(3 * kVocab, 0.0f);
  EXPECT_EQ(*sampler.logits_rows(step({"a", "b"}, {{5}, {}}), result), 3u);
  EXPECT_EQ(sampler.logits_rows(step({"a", "b"}, {{5}}), result).status().code(), StatusCode::internal);
  auto wrong = sampler.logits_rows(step({"a", "b"}), result);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("rank 2 returned 12 logits for 2 rows"), std::string::npos)
      << wrong.status().message();
}

TEST(StepSampler, DevicePlanOnlyForPlainSteps) {
  DriverRequests requests;
  requests.add(greedy("a"));
  requests.add(greedy("b"));
  requests.add(greedy("lp", /*logprobs=*/0));
  StepSampler sampler(0);
  std::vector<TokenSelection> plan;
  sampler.plan_device_selection(step({"a", "b"}), 2, requests, plan);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].temperature, 0.0f);
  sampler.plan_device_selection(step({"a", "lp"}), 2, requests, plan);
  EXPECT_TRUE(plan.empty());  // logprobs need the logits
  sampler.plan_device_selection(step({"a", "b"}, {{1}, {}}), 3, requests, plan);
  EXPECT_TRUE(plan.empty());  // drafts
  sampler.plan_device_selection(step({"a", "b"}), 3, requests, plan);
  EXPECT_TRUE(plan.empty());  // not one row per request
  sampler.plan_device_selection(step({"a", "gone"}), 2, requests, plan);
  EXPECT_TRUE(plan.empty());
}

TEST(StepSampler, TakesDeviceTokens) {
  DriverRequests requests;
  requests.add(greedy("a"));
  requests.add(greedy("b"));
  StepSampler sampler(0);
  const std::vector<TokenSelection> plan(2);
  ModelRunnerOutput result;
  result.vocab_size = kVocab;
  result.sampled_token_ids = {3, 0};
  StepOutput out;
  ASSERT_TRUE(sampler.take_device_tokens(step({"a", "b"}), result, plan, requests, out).ok());
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0].token, 3);
  EXPECT_EQ(requests.find("b")->output_token_ids, (std::vector<int32_t>{0}));
  EXPECT_EQ(sampler.take_device_tokens(step({"a", "b"}), result, {}, requests, out).code(), StatusCode::internal);
  result.sampled_token_ids = {3, 4};  // outside the vocabulary
  EXPECT_EQ(sampler.take_device_tokens(step({"a", "b"}), result, plan, requests, out).code(), StatusCode::internal);
}

}  // namespace
}  // namespace troupe::engine
