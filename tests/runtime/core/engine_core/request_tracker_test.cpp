// RequestTracker: detokenization, the one stop check, hold-back of text that
// may become a stop string, finish reasons and latency stats.
#include "runtime/core/engine_core/request_tracker.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine_test_support.hpp"

namespace troupe::engine {
namespace {

using testing::ids_of;
using testing::stories_tokenizer;
using testing::streamed_text;
using Clock = RequestTracker::Clock;

struct Run {
  std::vector<RequestOutput> deltas;
  FinalOutput final_output;
};

/// Feeds `tokens` one at a time; the scheduler caps the length after `cap` tokens (0: never).
Run feed(RequestTracker& t, const std::vector<int32_t>& tokens, size_t cap = 0) {
  Run run;
  auto now = Clock::now();
  t.on_scheduled(now);
  for (size_t i = 0; i < tokens.size() && !t.finished(); ++i) {
    now += std::chrono::milliseconds(10);
    auto d = t.on_token(tokens[i], nullptr, cap > 0 && i + 1 == cap, now);
    accumulate(run.final_output, d);
    run.deltas.push_back(std::move(d));
  }
  return run;
}

sampling::SamplingParams params(int max_tokens, std::vector<std::string> stop = {}) {
  sampling::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.stop = std::move(stop);
  return p;
}

TEST(RequestTracker, StreamsTheDecodedTextAndEndsAtMaxTokens) {
  const auto tokens = ids_of(" Once upon a time there was a little girl");
  ASSERT_GT(tokens.size(), 5u);
  RequestTracker t("r", {1, 2, 3}, params(static_cast<int>(tokens.size())), *stories_tokenizer(), Clock::now());
  auto run = feed(t, tokens);
  ASSERT_TRUE(t.finished());
  EXPECT_EQ(run.final_output.text, streamed_text(tokens));
  EXPECT_EQ(run.final_output.token_ids, tokens);
  EXPECT_EQ(run.final_output.finish_reason, FinishReason::length);
  EXPECT_EQ(run.final_output.prompt_token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(run.deltas.size(), tokens.size());
  for (size_t i = 0; i + 1 < run.deltas.size(); ++i) EXPECT_FALSE(run.deltas[i].finished);
  EXPECT_EQ(run.deltas.back().num_generated_tokens, static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(t.finished_stats().finish_reason, "length");
  EXPECT_EQ(t.finished_stats().num_generation_tokens, static_cast<int64_t>(tokens.size()));
}

TEST(RequestTracker, SchedulerLengthCapEndsItWithLength) {
  const auto tokens = ids_of(" Once upon a time there was");
  RequestTracker t("r", {1}, params(100), *stories_tokenizer(), Clock::now());
  auto run = feed(t, tokens, /*cap=*/3);
  EXPECT_TRUE(t.finished());
  EXPECT_EQ(run.final_output.token_ids.size(), 3u);
  EXPECT_EQ(run.final_output.finish_reason, FinishReason::length);
}

TEST(RequestTracker, StopStringSpanningTokensCutsTheTextAndIsHeldBackUntilDecided) {
  const auto tokens = ids_of(" Once upon a time there was a little girl");
  const std::string full = streamed_text(tokens);
  const std::string stop = "time there";
  ASSERT_NE(full.find(stop), std::string::npos);
  RequestTracker t("r", {1}, params(100, {stop}), *stories_tokenizer(), Clock::now());
  auto run = feed(t, tokens);
  ASSERT_TRUE(t.finished());
  EXPECT_EQ(run.final_output.finish_reason, FinishReason::stop);
  EXPECT_EQ(run.final_output.stop_reason, stop);
  EXPECT_EQ(run.final_output.text, full.substr(0, full.find(stop)));
  // No delta ever showed a piece of the stop string.
  std::string shown;
  for (const auto& d : run.deltas) {
    shown += d.new_text;
    EXPECT_EQ(shown.find("tim"), std::string::npos) << "streamed the start of the stop string: " << shown;
  }
}

TEST(RequestTracker, HeldBackTextIsReleasedWhenItDoesNotBecomeAStopString) {
  const auto tokens = ids_of(" Once upon a time");
  const std::string full = streamed_text(tokens);
  // "a timeless" starts like the text's tail " a time" but never completes.
  RequestTracker t("r", {1}, params(static_cast<int>(tokens.size()), {"a timeless"}), *stories_tokenizer(),
                   Clock::now());
  auto run = feed(t, tokens);
  EXPECT_EQ(run.final_output.finish_reason, FinishReason::length);
  EXPECT_EQ(run.final_output.text, full);
  // Before the last delta, the tail that could still become the stop string was held back.
  std::string before_last;
  for (size_t i = 0; i + 1 < run.deltas.size(); ++i) before_last += run.deltas[i].new_text;
  EXPECT_EQ(before_last.find("a time"), std::string::npos) << before_last;
}

TEST(RequestTracker, EndOfGenerationAndStopTokensAddNoText) {
  auto tok = stories_tokenizer();
  auto tokens = ids_of(" Once upon");
  const std::string text = streamed_text(tokens);
  tokens.push_back(tok->eos_id());
  RequestTracker eog("r", {1}, params(100), *tok, Clock::now());
  auto a = feed(eog, tokens);
  EXPECT_EQ(a.final_output.finish_reason, FinishReason::stop);
  EXPECT_EQ(a.final_output.text, text);
  EXPECT_EQ(a.final_output.stop_reason, "");  // EOS: no stop reason, as vLLM
  EXPECT_EQ(a.final_output.token_ids.back(), tok->eos_id());

  auto ignoring = params(100);
  ignoring.ignore_eos = true;
  RequestTracker on("r2", {1}, ignoring, *tok, Clock::now());
  auto b = feed(on, tokens);
  EXPECT_FALSE(on.finished());

  auto with_stop_id = params(100);
  const auto story = ids_of(" Once upon a time");
  ASSERT_GE(story.size(), 3u);
  const int32_t stop_token = story[2];
  ASSERT_EQ(std::count(story.begin(), story.begin() + 2, stop_token), 0);
  with_stop_id.stop_token_ids = {stop_token};
  RequestTracker st("r3", {1}, with_stop_id, *tok, Clock::now());
  auto c = feed(st, story);
  EXPECT_EQ(c.final_output.finish_reason, FinishReason::stop);
  EXPECT_EQ(c.final_output.stop_reason, std::to_string(stop_token));
  EXPECT_EQ(c.final_output.token_ids.size(), 3u);
  EXPECT_EQ(c.final_output.text, streamed_text({story[0], story[1]}));
}

TEST(RequestTracker, AbortAndErrorEndWithTheirReasonAndStatus) {
  RequestTracker t("r", {1}, params(100), *stories_tokenizer(), Clock::now());
  auto run = feed(t, ids_of(" Once"));
  auto end = t.on_end(FinishReason::error, data_loss("model.gguf: truncated"), Clock::now());
  EXPECT_TRUE(end.finished);
  EXPECT_EQ(end.finish_reason, FinishReason::error);
  EXPECT_EQ(end.error.code(), StatusCode::data_loss);
  EXPECT_EQ(t.finished_stats().finish_reason, "error");
}

TEST(RequestTracker, LatencyStatsFollowTheTimeline) {
  const auto t0 = Clock::now();
  RequestTracker t("r", {1, 2}, params(3), *stories_tokenizer(), t0);
  t.on_scheduled(t0 + std::chrono::milliseconds(100));
  auto tokens = ids_of(" Once upon a time");
  ASSERT_GE(tokens.size(), 3u);
  tokens.resize(3);
  (void)t.on_token(tokens[0], nullptr, false, t0 + std::chrono::milliseconds(300));
  EXPECT_TRUE(t.last_was_first_token());
  EXPECT_NEAR(t.last_latency_s(), 0.3, 1e-9);
  (void)t.on_token(tokens[1], nullptr, false, t0 + std::chrono::milliseconds(350));
  EXPECT_FALSE(t.last_was_first_token());
  EXPECT_NEAR(t.last_latency_s(), 0.05, 1e-9);
  (void)t.on_token(tokens[2], nullptr, false, t0 + std::chrono::milliseconds(450));
  ASSERT_TRUE(t.finished());
  const auto& s = t.finished_stats();
  EXPECT_NEAR(s.queued_time_s, 0.1, 1e-9);
  EXPECT_NEAR(s.time_to_first_token_s, 0.3, 1e-9);
  EXPECT_NEAR(s.prefill_time_s, 0.2, 1e-9);
  EXPECT_NEAR(s.decode_time_s, 0.15, 1e-9);
  EXPECT_NEAR(s.mean_time_per_output_token_s, 0.075, 1e-9);
  EXPECT_NEAR(s.e2e_latency_s, 0.45, 1e-9);
  EXPECT_EQ(s.num_prompt_tokens, 2);
}

TEST(RequestTracker, LogprobsTravelWithTheirTokens) {
  auto p = params(2);
  p.logprobs = 1;
  RequestTracker t("r", {1}, p, *stories_tokenizer(), Clock::now());
  ASSERT_TRUE(t.wants_logprobs());
  const auto tokens = ids_of(" Once upon");
  TokenLogprob lp{tokens[0], -0.5f, {tokens[0]}, {-0.5f}};
  auto d = t.on_token(tokens[0], &lp, false, Clock::now());
  ASSERT_EQ(d.new_logprobs.size(), 1u);
  EXPECT_EQ(d.new_logprobs[0].token_id, tokens[0]);
  EXPECT_FLOAT_EQ(d.new_logprobs[0].logprob, -0.5f);
}

}  // namespace
}  // namespace troupe::engine
