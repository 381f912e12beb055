// DraftProposer: the n-gram drafts of each sampled request, cut to its max_tokens.
#include "runtime/rank/runner/draft_proposer.hpp"

#include <gtest/gtest.h>

namespace troupe::engine {
namespace {

SpeculativeConfig ngram(int k, int min_n = 1, int max_n = 3) {
  SpeculativeConfig c;
  c.method = "ngram";
  c.num_speculative_tokens = k;
  c.prompt_lookup_min = min_n;
  c.prompt_lookup_max = max_n;
  return c;
}

SamplingState request(std::string id, std::vector<int32_t> prompt, std::vector<int32_t> output, int32_t max_tokens) {
  SamplingState s;
  s.request_id = std::move(id);
  s.prompt_token_ids = std::move(prompt);
  s.output_token_ids = std::move(output);
  s.params.max_tokens = max_tokens;
  return s;
}

TEST(DraftProposer, ProposesFromPromptAndOutput) {
  DraftProposer proposer(ngram(3));
  DriverRequests requests;
  // Prompt + output = 1 2 3 4 5 1 2: the suffix "1 2" occurred at the start, followed by 3 4 5.
  requests.add(request("a", {1, 2, 3, 4, 5}, {1, 2}, 100));
  requests.add(request("b", {7, 8, 9}, {}, 100));  // nothing repeats
  StepOutput out;
  ASSERT_TRUE(proposer.propose({"a", "b"}, requests, out).ok());
  ASSERT_EQ(out.draft_token_ids.size(), 2u);
  EXPECT_EQ(out.draft_token_ids[0], (std::vector<int32_t>{3, 4, 5}));
  EXPECT_TRUE(out.draft_token_ids[1].empty());
}

TEST(DraftProposer, NextStepStaysWithinMaxTokens) {
  DraftProposer proposer(ngram(3));
  DriverRequests requests;
  // 2 of 5 tokens generated: the next step may emit 3, its drafts' accepted prefix and one more.
  requests.add(request("a", {1, 2, 3, 4, 5}, {1, 2}, 5));
  requests.add(request("done", {1, 2, 3, 1, 2}, {3}, 2));  // one token left: no draft
  StepOutput out;
  ASSERT_TRUE(proposer.propose({"a", "done"}, requests, out).ok());
  EXPECT_EQ(out.draft_token_ids[0], (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(out.draft_token_ids[1].empty());
}

TEST(DraftProposer, PoolingRequestsAndUnknownIds) {
  DraftProposer proposer(ngram(2));
  DriverRequests requests;
  SamplingState pooled = request("p", {1, 2, 1}, {}, 100);
  pooled.pooling = true;
  requests.add(pooled);
  StepOutput out;
  ASSERT_TRUE(proposer.propose({"p"}, requests, out).ok());
  EXPECT_TRUE(out.draft_token_ids.at(0).empty());
  EXPECT_EQ(proposer.propose({"nobody"}, requests, out).code(), StatusCode::internal);
}

}  // namespace
}  // namespace troupe::engine
