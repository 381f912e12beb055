// Verifying drafts: greedy verification gives what sample() gives without drafts;
// random verification keeps the target distribution (a chi-square test over many
// seeded draws of one position with fixed logits: the seeds are fixed, so the test is
// deterministic, and a sampler that skews the distribution fails it).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/rank/sampling/rejection_sampler.hpp"
#include "runtime/rank/sampling/sampler.hpp"

namespace troupe::sampling {
namespace {

const std::vector<float> kLogits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.0f, 2.2f};

std::vector<double> softmax(const std::vector<float>& l, float temperature) {
  std::vector<double> p(l.size());
  double mx = *std::max_element(l.begin(), l.end());
  double sum = 0;
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp((l[i] - mx) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

// Pearson's chi-square statistic of `counts` against probabilities `p` (cells with p > 0).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double e = p[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(RejectionSampler, GreedyAcceptsWhileTheDraftIsTheArgmaxThenEmitsTheTargetsToken) {
  // Two rows of logits repeated: row 0's argmax is 1, row 1's argmax is 1 as well.
  const int64_t vocab = static_cast<int64_t>(kLogits.size());
  std::vector<float> rows;
  for (int i = 0; i < 3; ++i) rows.insert(rows.end(), kLogits.begin(), kLogits.end());
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {3, 4};
  // All drafts right: both accepted, plus the bonus token from row 2.
  auto all = verify_drafts(rows.data(), vocab, greedy, prompt, {}, std::vector<int32_t>{1, 1}, 7);
  EXPECT_EQ(all.num_accepted, 2);
  ASSERT_EQ(all.tokens.size(), 3u);
  for (const auto& t : all.tokens) EXPECT_EQ(t.token, 1);
  // The first draft wrong: nothing accepted, the target's argmax instead.
  auto none = verify_drafts(rows.data(), vocab, greedy, prompt, {}, std::vector<int32_t>{3, 1}, 7);
  EXPECT_EQ(none.num_accepted, 0);
  ASSERT_EQ(none.tokens.size(), 1u);
  EXPECT_EQ(none.tokens[0].token, 1);
  // With a repetition penalty the history matters: each row sees the accepted drafts.
  SamplingParams penalised = greedy;
  penalised.repetition_penalty = 2.0f;
  penalised.logprobs = 2;
  auto pen = verify_drafts(rows.data(), vocab, penalised, prompt, {}, std::vector<int32_t>{1, 7}, 7);
  // Row 0: argmax 1 (accepted). Row 1 penalises 1 (2.5 -> 1.25): argmax 7 (2.2), accepted.
  // Row 2 penalises 1 and 7: argmax 5 (1.7).
  EXPECT_EQ(pen.num_accepted, 2);
  ASSERT_EQ(pen.tokens.size(), 3u);
  EXPECT_EQ(pen.tokens[2].token, 5);
  // What sample() gives step by step without drafts.
  std::vector<int32_t> history;
  for (int i = 0; i < 3; ++i) {
    auto s = sample(kLogits.data(), vocab, penalised, prompt, history, 0);
    EXPECT_EQ(pen.tokens[static_cast<size_t>(i)].token, s.token) << i;
    EXPECT_FLOAT_EQ(pen.tokens[static_cast<size_t>(i)].logprob, s.logprob) << i;
    EXPECT_EQ(pen.tokens[static_cast<size_t>(i)].top_logprobs, s.top_logprobs) << i;
    history.push_back(s.token);
  }
}

TEST(RejectionSampler, TheFirstTokenKeepsTheTargetDistributionWhateverTheDraft) {
  const int64_t vocab = static_cast<int64_t>(kLogits.size());
  std::vector<float> rows;
  for (int i = 0; i < 2; ++i) rows.insert(rows.end(), kLogits.begin(), kLogits.end());
  SamplingParams p;
  p.temperature = 0.8f;
  const std::vector<double> target = softmax(kLogits, 0.8f);
  constexpr int kDraws = 40000;
  // df = 7; P(chi2 > 24.32) = 0.001.
  for (int32_t draft : {1, 4, 6}) {  // likely, unlikely, middling
    std::vector<int> counts(kLogits.size(), 0);
    int accepted = 0;
    for (int seed = 0; seed < kDraws; ++seed) {
      auto v = verify_drafts(rows.data(), vocab, p, {}, {}, std::vector<int32_t>{draft}, static_cast<uint64_t>(seed));
      ++counts[static_cast<size_t>(v.tokens[0].token)];
      accepted += v.num_accepted;
    }
    EXPECT_LT(chi_square(counts, target, kDraws), 24.32) << "draft " << draft;
    // A draft is accepted with probability p(draft).
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, target[static_cast<size_t>(draft)], 0.01) << draft;
  }
}

TEST(RejectionSampler, TopKAndTopPAreKeptAndTheSecondTokenFollowsItsOwnRow) {
  const int64_t vocab = static_cast<int64_t>(kLogits.size());
  // Row 1 differs from row 0, so the token after an accepted draft must follow row 1.
  std::vector<float> row1 = {0.5f, -2.0f, 1.5f, 0.1f, 1.0f, -0.5f, 0.8f, 0.0f};
  std::vector<float> rows = kLogits;
  rows.insert(rows.end(), row1.begin(), row1.end());
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 4;
  std::vector<float> probs0, probs1;
  target_probs(kLogits.data(), vocab, p, {}, {}, probs0);
  target_probs(row1.data(), vocab, p, {}, {}, probs1);
  EXPECT_EQ(std::count_if(probs0.begin(), probs0.end(), [](float x) { return x > 0; }), 4);
  constexpr int kDraws = 40000;
  std::vector<int> first(kLogits.size(), 0), second(kLogits.size(), 0);
  int n_second = 0;
  for (int seed = 0; seed < kDraws; ++seed) {
    // Draft 7 (in the top 4 of row 0), then 2.
    auto v = verify_drafts(rows.data(), vocab, p, {}, {}, std::vector<int32_t>{7}, static_cast<uint64_t>(seed) + 1000003);
    ++first[static_cast<size_t>(v.tokens[0].token)];
    if (v.num_accepted == 1) {
      ++second[static_cast<size_t>(v.tokens[1].token)];
      ++n_second;
    }
  }
  std::vector<double> p0(probs0.begin(), probs0.end()), p1(probs1.begin(), probs1.end());
  EXPECT_LT(chi_square(first, p0, kDraws), 16.27);  // df = 3; P(chi2 > 16.27) = 0.001
  ASSERT_GT(n_second, 1000);
  EXPECT_LT(chi_square(second, p1, n_second), 16.27);
}

TEST(RejectionSampler, ADraftOutsideTheVocabularyIsRejected) {
  const int64_t vocab = static_cast<int64_t>(kLogits.size());
  std::vector<float> rows = kLogits;
  rows.insert(rows.end(), kLogits.begin(), kLogits.end());
  SamplingParams p;
  p.temperature = 1.0f;
  auto v = verify_drafts(rows.data(), vocab, p, {}, {}, std::vector<int32_t>{99}, 5);
  EXPECT_EQ(v.num_accepted, 0);
  ASSERT_EQ(v.tokens.size(), 1u);
  EXPECT_GE(v.tokens[0].token, 0);
  EXPECT_LT(v.tokens[0].token, vocab);
}

}  // namespace
}  // namespace troupe::sampling
