// Sampling parameters, the sampler (greedy, penalties, filters, seeds, logit_bias,
// allowed_token_ids, min_tokens) and the stop checker.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "runtime/rank/sampling/sampler.hpp"
#include "runtime/protocol/sampling_params.hpp"
#include "runtime/core/engine_core/stop_checker.hpp"

namespace troupe::sampling {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(SamplingParamsTest, ValidateNamesTheParameter) {
  SamplingParams p;
  EXPECT_TRUE(p.validate().ok());
  auto bad = [](auto mutate, const char* name) {
    SamplingParams q;
    mutate(q);
    Status s = q.validate();
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  };
  bad([](SamplingParams& q) { q.temperature = std::numeric_limits<float>::quiet_NaN(); }, "temperature");
  bad([](SamplingParams& q) { q.temperature = -0.5f; }, "temperature");
  bad([](SamplingParams& q) { q.top_p = 0.0f; }, "top_p");
  bad([](SamplingParams& q) { q.top_p = 1.5f; }, "top_p");
  bad([](SamplingParams& q) { q.top_k = -3; }, "top_k");
  bad([](SamplingParams& q) { q.min_p = 2.0f; }, "min_p");
  bad([](SamplingParams& q) { q.repetition_penalty = 0.0f; }, "repetition_penalty");
  bad([](SamplingParams& q) { q.presence_penalty = 3.0f; }, "presence_penalty");
  bad([](SamplingParams& q) { q.frequency_penalty = -2.5f; }, "frequency_penalty");
  bad([](SamplingParams& q) { q.max_tokens = 0; }, "max_tokens");
  bad([](SamplingParams& q) { q.stop = {""}; }, "stop");
  bad([](SamplingParams& q) { q.logprobs = 100; }, "logprobs");
  bad([](SamplingParams& q) { q.logit_bias = {{3, 101.0f}}; }, "logit_bias");
  bad([](SamplingParams& q) { q.logit_bias = {{-1, 1.0f}}; }, "logit_bias");
  bad([](SamplingParams& q) { q.allowed_token_ids = {-2}; }, "allowed_token_ids");
  bad([](SamplingParams& q) { q.min_tokens = 17; }, "min_tokens");  // above max_tokens (16)
  bad([](SamplingParams& q) { q.min_tokens = -1; }, "min_tokens");
}

TEST(SamplerTest, GreedyIsArgmaxFirstIndexWinsTies) {
  SamplingParams p;
  p.temperature = 0;
  auto l = logits_of({1.0f, 3.0f, 3.0f, -1.0f});
  EXPECT_EQ(sample(l.data(), 4, p, {}, {}, 0).token, 1);
  p.logprobs = 0;  // the sampled token's logprob, no alternatives
  auto r = sample(l.data(), 4, p, {}, {}, 0);
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-1.0));
  EXPECT_NEAR(r.logprob, 3.0 - lse, 1e-5);
}

TEST(SamplerTest, RepetitionPenaltyAsVllm) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  auto l = logits_of({2.0f, 1.5f, -1.0f});
  std::vector<int32_t> prompt{0};
  // 2.0 / 2 = 1.0 < 1.5: token 1 wins.
  EXPECT_EQ(sample(l.data(), 3, p, prompt, {}, 0).token, 1);
  // Negative logits are multiplied: token 2 stays last.
  auto l2 = logits_of({-0.5f, -0.6f});
  std::vector<int32_t> out{0};
  EXPECT_EQ(sample(l2.data(), 2, p, {}, out, 0).token, 1);  // -1.0 vs -0.6
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesCountOutputOnly) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.5f;
  auto l = logits_of({3.0f, 2.2f});
  std::vector<int32_t> prompt{1, 1, 1, 1};
  std::vector<int32_t> out{0, 0};
  EXPECT_EQ(sample(l.data(), 2, p, prompt, {}, 0).token, 0);  // prompt tokens don't count
  EXPECT_EQ(sample(l.data(), 2, p, prompt, out, 0).token, 1);  // 3 - 2*0.5 = 2 < 2.2
  p.frequency_penalty = 0;
  p.presence_penalty = 0.7f;
  std::vector<int32_t> once{0};
  EXPECT_EQ(sample(l.data(), 2, p, {}, once, 0).token, 0);  // 3 - 0.7 = 2.3 > 2.2
  p.presence_penalty = 0.9f;
  EXPECT_EQ(sample(l.data(), 2, p, {}, out, 0).token, 1);   // once per token however often: 2.1 < 2.2
}

TEST(SamplerTest, SeededSamplingIsReproducibleAndVaries) {
  SamplingParams p;
  p.temperature = 1.0f;
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = static_cast<float>(i % 7) * 0.3f;
  std::map<int32_t, int> seen;
  for (uint64_t step = 0; step < 200; ++step) {
    const uint64_t seed = derive_step_seed(1234, step);
    auto a = sample(l.data(), 50, p, {}, {}, seed);
    auto b = sample(l.data(), 50, p, {}, {}, seed);
    EXPECT_EQ(a.token, b.token);
    ++seen[a.token];
  }
  EXPECT_GT(seen.size(), 10u);
  EXPECT_NE(derive_step_seed(1, 0), derive_step_seed(1, 1));
  EXPECT_NE(derive_step_seed(1, 0), derive_step_seed(2, 0));
}

TEST(SamplerTest, TopKOneIsGreedyAndFiltersRestrictSupport) {
  std::vector<float> l{0.1f, 2.0f, 1.9f, 0.5f, -3.0f};
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  for (uint64_t s = 0; s < 50; ++s) EXPECT_EQ(sample(l.data(), 5, p, {}, {}, s).token, 1);
  p.top_k = 2;
  for (uint64_t s = 0; s < 100; ++s) {
    int32_t t = sample(l.data(), 5, p, {}, {}, s).token;
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
  p.top_k = 0;
  p.temperature = 1.0f;
  p.top_p = 0.5f;  // token 1 alone has ~41% of the mass, 1 + 2 > 50%
  for (uint64_t s = 0; s < 100; ++s) {
    int32_t t = sample(l.data(), 5, p, {}, {}, s).token;
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // exp(1.9-2.0) = 0.9 stays; exp(0.5-2) = 0.22 goes
  for (uint64_t s = 0; s < 100; ++s) {
    int32_t t = sample(l.data(), 5, p, {}, {}, s).token;
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
}

TEST(SamplerTest, TopLogprobsAreSortedRawLogprobs) {
  std::vector<float> l{0.0f, 1.0f, 3.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  auto r = sample(l.data(), 4, p, {}, {}, 0);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].first, 2);
  EXPECT_EQ(r.top_logprobs[1].first, 3);
  EXPECT_NEAR(r.top_logprobs[0].second, r.logprob, 1e-6);
  EXPECT_NEAR(r.top_logprobs[0].second - r.top_logprobs[1].second, 1.0, 1e-5);
}

TEST(SamplerTest, LogitBiasIsAddedBeforeThePenalties) {
  SamplingParams p;
  p.temperature = 0;
  auto l = logits_of({1.0f, 3.0f, 2.0f, 0.0f});
  p.logit_bias = {{3, 100.0f}};
  EXPECT_EQ(sample(l.data(), 4, p, {}, {}, 0).token, 3);
  p.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(sample(l.data(), 4, p, {}, {}, 0).token, 2);
  // 2.0 + 2.0 = 4.0 > 3.0; a repetition penalty of 2 on token 2 then halves it: 2.0 < 3.0.
  p.logit_bias = {{2, 2.0f}};
  EXPECT_EQ(sample(l.data(), 4, p, {}, {}, 0).token, 2);
  p.repetition_penalty = 2.0f;
  std::vector<int32_t> out{2};
  EXPECT_EQ(sample(l.data(), 4, p, {}, out, 0).token, 1);
  // Ids past the vocabulary are skipped (the API refuses them before).
  p = SamplingParams{};
  p.temperature = 0;
  p.logit_bias = {{99, 100.0f}};
  EXPECT_EQ(sample(l.data(), 4, p, {}, {}, 0).token, 1);
  // Logprobs stay those of the model (vLLM's raw logprobs).
  p.logit_bias = {{3, 100.0f}};
  p.logprobs = 0;
  const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(0.0));
  EXPECT_NEAR(sample(l.data(), 4, p, {}, {}, 0).logprob, 0.0 - lse, 1e-5);
}

TEST(SamplerTest, AllowedTokenIdsAreTheOnlyOnesSampled) {
  SamplingParams p;
  p.temperature = 0;
  auto l = logits_of({1.0f, 3.0f, 2.0f, 0.5f, 2.5f});
  p.allowed_token_ids = {0, 3};
  EXPECT_EQ(sample(l.data(), 5, p, {}, {}, 0).token, 0);
  p.temperature = 1.5f;
  std::map<int32_t, int> seen;
  for (uint64_t seed = 0; seed < 400; ++seed) ++seen[sample(l.data(), 5, p, {}, {}, seed).token];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[3], 0);
  std::vector<float> probs;
  target_probs(l.data(), 5, p, {}, {}, probs);
  EXPECT_EQ(probs[1] + probs[2] + probs[4], 0.0f);
  EXPECT_NEAR(probs[0] + probs[3], 1.0f, 1e-6);
}

TEST(SamplerTest, MinTokensKeepsTheStopTokensOutUntilReached) {
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.min_tokens_banned_ids = {1, 4};  // e.g. end-of-generation and a stop_token_id
  auto l = logits_of({1.0f, 3.0f, 2.0f, 0.5f, 2.5f});
  std::vector<int32_t> none, one{2}, two{2, 2};
  EXPECT_EQ(sample(l.data(), 5, p, {}, none, 0).token, 2);
  EXPECT_EQ(sample(l.data(), 5, p, {}, one, 0).token, 2);
  EXPECT_EQ(sample(l.data(), 5, p, {}, two, 0).token, 1);  // reached: the model's choice again
  std::vector<float> probs;
  p.temperature = 1.0f;
  target_probs(l.data(), 5, p, {}, one, probs);
  EXPECT_EQ(probs[1], 0.0f);
  EXPECT_EQ(probs[4], 0.0f);
  // Nothing else allowed: min_tokens gives way rather than leave nothing to sample.
  p.temperature = 0;
  p.allowed_token_ids = {1, 4};
  EXPECT_EQ(sample(l.data(), 5, p, {}, none, 0).token, 1);
}

// vLLM's bad_words: a one-token word is never sampled; a multi-token word's last token is
// banned exactly when the output ends with the word's other tokens.
TEST(SamplerTest, BadWordsBanOneTokenWordsAlwaysAndTheLastTokenAfterThePrefix) {
  auto l = logits_of({1.0f, 3.0f, 2.0f, 0.5f, 2.5f});
  const std::vector<std::vector<int32_t>> words{{1}, {2, 0, 4}};
  auto masked = [&](std::vector<int32_t> output) {
    std::vector<float> row = l;
    apply_bad_words(row.data(), 5, words, output);
    std::vector<int32_t> out;
    for (int32_t i = 0; i < 5; ++i)
      if (std::isinf(row[i]) && row[i] < 0) out.push_back(i);
      else EXPECT_EQ(row[i], l[i]);
    return out;
  };
  EXPECT_EQ(masked({}), (std::vector<int32_t>{1}));           // no output: only the one-token word
  EXPECT_EQ(masked({2}), (std::vector<int32_t>{1}));          // half the prefix
  EXPECT_EQ(masked({2, 0}), (std::vector<int32_t>{1, 4}));    // the prefix: its last token too
  EXPECT_EQ(masked({3, 2, 0}), (std::vector<int32_t>{1, 4})); // ends with the prefix
  EXPECT_EQ(masked({2, 0, 3}), (std::vector<int32_t>{1}));    // the prefix, not at the end
  EXPECT_EQ(masked({0, 2}), (std::vector<int32_t>{1}));       // its tokens in another order

  // Through sample(): greedy picks 1, then 4 instead; after the prefix, 4 gives way to 2.
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(sample(l.data(), 5, p, {}, {}, 0).token, 1);
  p.bad_words_token_ids = words;
  EXPECT_EQ(sample(l.data(), 5, p, {}, {}, 0).token, 4);
  std::vector<int32_t> prefix{2, 0};
  EXPECT_EQ(sample(l.data(), 5, p, {}, prefix, 0).token, 2);
  EXPECT_FALSE(device_selection(p, 0, 0).has_value());  // such rows are sampled on the host
  std::vector<float> probs;
  p.temperature = 1.0f;
  target_probs(l.data(), 5, p, {}, prefix, probs);
  EXPECT_EQ(probs[1], 0.0f);
  EXPECT_EQ(probs[4], 0.0f);
  EXPECT_GT(probs[2], 0.0f);
}

TEST(StopCheckerTest, StopStringSpanningTokensTruncates) {
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"END"};
  StopChecker c(p);
  std::string text;
  auto feed = [&](const std::string& piece, size_t n) {
    text += piece;
    return c.check(7, false, text, piece.size(), n);
  };
  EXPECT_FALSE(feed("Hello E", 1).finished);
  EXPECT_EQ(c.safe_text_length(text), 6u);  // "E" is held back
  EXPECT_FALSE(feed("N", 2).finished);
  auto d = feed("D more", 3);
  ASSERT_TRUE(d.finished);
  EXPECT_EQ(d.finish_reason, troupe::FinishReason::stop);
  EXPECT_EQ(d.stop_reason, "END");
  EXPECT_EQ(text.substr(0, d.text_length), "Hello ");
}

TEST(StopCheckerTest, TokensAndLength) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop_token_ids = {42};
  StopChecker c(p);
  EXPECT_FALSE(c.check(5, false, "a", 1, 1).finished);
  auto eog = c.check(2, true, "a", 0, 2);
  EXPECT_TRUE(eog.finished);
  EXPECT_EQ(eog.finish_reason, troupe::FinishReason::stop);
  EXPECT_EQ(eog.stop_token, 2);
  auto id = c.check(42, false, "a", 0, 2);
  EXPECT_TRUE(id.finished);
  EXPECT_EQ(id.finish_reason, troupe::FinishReason::stop);
  auto len = c.check(5, false, "abc", 1, 3);
  EXPECT_TRUE(len.finished);
  EXPECT_EQ(len.finish_reason, troupe::FinishReason::length);
  p.ignore_eos = true;
  StopChecker ignoring(p);
  EXPECT_FALSE(ignoring.check(2, true, "a", 1, 1).finished);
}

TEST(StopCheckerTest, IncludeStopStrInOutputKeepsTheString) {
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"END"};
  p.include_stop_str_in_output = true;
  StopChecker c(p);
  auto d = c.check(7, false, "Hello END more", 14, 1);
  ASSERT_TRUE(d.finished);
  EXPECT_EQ(d.stop_reason, "END");
  EXPECT_EQ(std::string("Hello END more").substr(0, d.text_length), "Hello END");
}

TEST(StopCheckerTest, MinTokensDefersStopTokensAndStrings) {
  SamplingParams p;
  p.max_tokens = 10;
  p.min_tokens = 3;
  p.stop = {"END"};
  p.stop_token_ids = {42};
  StopChecker c(p);
  EXPECT_FALSE(c.is_stop_token(42, false, 2));
  EXPECT_FALSE(c.check(42, false, "a", 1, 2).finished);
  EXPECT_FALSE(c.check(2, true, "a", 1, 2).finished);
  EXPECT_FALSE(c.check(7, false, "aEND", 3, 2).finished);
  // From the min_tokens-th token on, as without it (vLLM).
  EXPECT_TRUE(c.is_stop_token(42, false, 3));
  EXPECT_TRUE(c.check(7, false, "aENDEND", 3, 3).finished);
  EXPECT_TRUE(c.check(2, true, "a", 0, 3).finished);
}

}  // namespace
}  // namespace troupe::sampling
