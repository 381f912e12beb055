// --speculative-config parsing (vLLM's defaults, clear errors) and the n-gram drafter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/rank/spec_decode/ngram_proposer.hpp"
#include "runtime/rank/spec_decode/speculative_config.hpp"

namespace troupe::spec_decode {
namespace {

TEST(SpeculativeConfig, ParsesTheNgramMethodWithVllmsDefaults) {
  auto full = parse_speculative_config(
      R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":5,"prompt_lookup_min":2})");
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  EXPECT_EQ(full->method, "ngram");
  EXPECT_EQ(full->num_speculative_tokens, 4);
  EXPECT_EQ(full->prompt_lookup_max, 5);
  EXPECT_EQ(full->prompt_lookup_min, 2);
  EXPECT_TRUE(full->enabled());
  auto both_absent = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3})");
  ASSERT_TRUE(both_absent.ok());
  EXPECT_EQ(both_absent->prompt_lookup_min, 5);
  EXPECT_EQ(both_absent->prompt_lookup_max, 5);
  auto only_max = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3})");
  ASSERT_TRUE(only_max.ok());
  EXPECT_EQ(only_max->prompt_lookup_min, 3);
  auto only_min = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":2})");
  ASSERT_TRUE(only_min.ok());
  EXPECT_EQ(only_min->prompt_lookup_max, 2);
  EXPECT_EQ(describe(*full), "ngram, 4 speculative tokens, n-gram 2..5");
  EXPECT_EQ(describe(SpeculativeConfig{}), "off");
}

TEST(SpeculativeConfig, BadConfigsAreClearErrors) {
  auto error = [](const std::string& json, StatusCode code, const std::string& words) {
    auto r = parse_speculative_config(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), code) << json << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(words), std::string::npos) << json << ": " << r.status().message();
  };
  error("{\"method\":", StatusCode::invalid_argument, "not valid JSON");
  error("[1,2]", StatusCode::invalid_argument, "must be a JSON object");
  error(R"({"num_speculative_tokens":3})", StatusCode::invalid_argument, "\"method\"");
  error(R"({"method":"bogus","num_speculative_tokens":3})", StatusCode::invalid_argument, "unknown method \"bogus\"");
  error(R"({"method":"eagle","num_speculative_tokens":3})", StatusCode::not_supported, "draft model");
  error(R"({"method":"ngram"})", StatusCode::invalid_argument, "num_speculative_tokens");
  error(R"({"method":"ngram","num_speculative_tokens":0})", StatusCode::invalid_argument, "at least 1");
  error(R"({"method":"ngram","num_speculative_tokens":"4"})", StatusCode::invalid_argument, "must be an integer");
  error(R"({"method":"ngram","num_speculative_tokens":500})", StatusCode::invalid_argument, "1..128");
  error(R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":4,"prompt_lookup_max":2})",
        StatusCode::invalid_argument, "must not exceed");
  error(R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":-1})", StatusCode::invalid_argument,
        "prompt_lookup_min");
  error(R"({"method":"ngram","num_speculative_tokens":3,"model":"x"})", StatusCode::invalid_argument,
        "unknown key \"model\"");
}

TEST(NgramProposer, ProposesWhatFollowedTheLongestEarlierSuffix) {
  // vLLM's example: [4, 2, 3] (n = 3) never occurred; [2, 3] (n = 2) did, at index 1.
  const std::vector<int32_t> t = {1, 2, 3, 4, 2, 3};
  EXPECT_EQ(propose_ngram(t, 2, 3, 4), (std::vector<int32_t>{4, 2, 3}));
  EXPECT_EQ(propose_ngram(t, 2, 3, 2), (std::vector<int32_t>{4, 2}));
  EXPECT_TRUE(propose_ngram(t, 3, 3, 4).empty());
  // Longer matches win over shorter ones: [5, 6] matches at 0 and at 4, [9, 5, 6] only at 3.
  const std::vector<int32_t> u = {5, 6, 1, 9, 5, 6, 2, 7, 9, 5, 6};
  EXPECT_EQ(propose_ngram(u, 2, 3, 3), (std::vector<int32_t>{2, 7, 9}));
  EXPECT_EQ(propose_ngram(u, 2, 2, 3), (std::vector<int32_t>{1, 9, 5}));  // the first occurrence
  // Nothing repeats; a sequence shorter than min_n + 1; k = 0.
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1}, 1, 3, 4).empty());
  EXPECT_TRUE(propose_ngram(t, 2, 3, 0).empty());
  // A run of one token: n = 1 matches at 0 and the continuation is the rest of the run.
  EXPECT_EQ(propose_ngram(std::vector<int32_t>{8, 8, 8}, 1, 1, 5), (std::vector<int32_t>{8, 8}));
}

TEST(NgramDrafter, ProposesPerRowWithinEachBudgetAndHandsTheDraftsOverOnce) {
  SpeculativeConfig c{"ngram", 3, 3, 2};
  NgramDrafter drafter(c);
  EXPECT_EQ(drafter.num_speculative_tokens(), 3);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 1, 2};
  const std::vector<int32_t> b = {7, 8, 9};
  std::vector<std::span<const int32_t>> contexts = {a, b, a};
  const std::vector<int32_t> budgets = {3, 3, 1};
  drafter.propose(contexts, budgets);
  DraftTokensExtension& ext = drafter;
  auto drafts = ext.take_draft_token_ids();
  ASSERT_TRUE(drafts.ok());
  ASSERT_EQ(drafts->size(), 3u);
  EXPECT_EQ((*drafts)[0], (std::vector<int32_t>{3, 4, 5}));
  EXPECT_TRUE((*drafts)[1].empty());
  EXPECT_EQ((*drafts)[2], (std::vector<int32_t>{3}));
  auto again = ext.take_draft_token_ids();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

}  // namespace
}  // namespace troupe::spec_decode
