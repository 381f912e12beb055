// Speculative decoding through the real CLI and a real `troupe serve` on loopback:
// --speculative-config errors, greedy completions (sent concurrently, so requests with
// and without drafts share steps) equal to a server without it, and vLLM's spec-decode
// counters in /metrics.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

const std::string kStories = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
const std::string kSpec = R"('{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3,"prompt_lookup_min":1}')";

TEST(SpecDecodeCli, BadConfigsAreClearErrors) {
  struct Case {
    std::string config, words;
  };
  for (const Case& c : {Case{"'{\"method\":'", "not valid JSON"},
                        Case{"'{\"num_speculative_tokens\":3}'", "\"method\""},
                        Case{"'{\"method\":\"eagle\",\"num_speculative_tokens\":3}'", "needs a draft model"},
                        Case{"'{\"method\":\"ngram\",\"num_speculative_tokens\":0}'", "at least 1"},
                        Case{"'{\"method\":\"ngram\",\"num_speculative_tokens\":2,\"prompt_lookup_min\":3,"
                             "\"prompt_lookup_max\":2}'",
                             "must not exceed"}}) {
    auto r = testing::run_troupe("generate " + kStories + " -p hi --speculative-config " + c.config);
    EXPECT_NE(r.exit_code, 0) << c.config;
    EXPECT_NE(r.err.find(c.words), std::string::npos) << c.config << ": " << r.err;
  }
  auto with_processors =
      testing::run_troupe("generate " + kStories + " -p hi --logits-processors anything --speculative-config " + kSpec);
  EXPECT_NE(with_processors.exit_code, 0);
  EXPECT_NE(with_processors.err.find("not implemented yet"), std::string::npos) << with_processors.err;
}

TEST(SpecDecodeCli, GenerateWithDraftsPrintsTheSameGreedyText) {
  const std::string args = "generate " + kStories + " --max-tokens 60 -p 'Once upon a time, there was a girl. Once upon a time'";
  auto plain = testing::run_troupe(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto spec = testing::run_troupe(args + " --speculative-config " + kSpec);
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_NE(spec.err.find("Speculative decoding: ngram, 4 speculative tokens, n-gram 1..3"), std::string::npos)
      << spec.err;
}

// The value of a counter of /metrics with these labels inside its braces, or -1.
double counter(const std::string& metrics, const std::string& name, const std::string& label = "") {
  size_t at = 0;
  while ((at = metrics.find("\n" + name + "{", at)) != std::string::npos) {
    const size_t close = metrics.find("} ", at);
    const std::string labels = metrics.substr(at, close - at);
    if (label.empty() || labels.find(label) != std::string::npos)
      return std::stod(metrics.substr(close + 2, metrics.find('\n', close) - close - 2));
    at = close;
  }
  return -1;
}

TEST(SpecDecodeHttp, CompletionsEqualAServerWithoutDraftsAndTheCountersAreExposed) {
  tests::ServeProcess plain({});
  tests::ServeProcess spec({"--speculative-config",
                            R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3,"prompt_lookup_min":1})"});
  ASSERT_TRUE(plain.wait_healthy()) << plain.log();
  ASSERT_TRUE(spec.wait_healthy()) << spec.log();
  const std::vector<json> bodies = {
      {{"prompt", "Once upon a time, there was a little girl named Lily. Once upon a time, there was"},
       {"max_tokens", 64},
       {"temperature", 0}},
      {{"prompt", "Tom and his dog"}, {"max_tokens", 40}, {"temperature", 0}},
      {{"prompt", "The sun was hot. The sun was"}, {"max_tokens", 9}, {"temperature", 0}},
      {{"prompt", "Lily went to the park. Lily went to the"}, {"max_tokens", 64}, {"temperature", 0},
       {"stop", {" park"}}},
  };
  auto complete = [](int port, const json& body) {
    auto r = http::request("127.0.0.1", port, "POST", "/v1/completions", body.dump(),
                           {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(120));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body, nullptr, false);
  };
  std::vector<json> want;
  for (const auto& b : bodies) want.push_back(complete(plain.port(), b));
  std::vector<std::future<json>> got;
  for (const auto& b : bodies) got.push_back(std::async(std::launch::async, complete, spec.port(), b));
  for (size_t i = 0; i < bodies.size(); ++i) {
    json g = got[i].get();
    ASSERT_TRUE(want[i].is_object() && g.is_object()) << i;
    EXPECT_EQ(g["choices"][0]["text"], want[i]["choices"][0]["text"]) << i;
    EXPECT_EQ(g["choices"][0]["finish_reason"], want[i]["choices"][0]["finish_reason"]) << i;
    EXPECT_EQ(g["usage"]["completion_tokens"], want[i]["usage"]["completion_tokens"]) << i;
  }
  auto metrics = http::request("127.0.0.1", spec.port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(30));
  ASSERT_TRUE(metrics.ok());
  const std::string& m = metrics->body;
  const double drafts = counter(m, "troupe:spec_decode_num_drafts_total");
  const double draft_tokens = counter(m, "troupe:spec_decode_num_draft_tokens_total");
  const double accepted = counter(m, "troupe:spec_decode_num_accepted_tokens_total");
  EXPECT_GT(drafts, 0) << m;
  EXPECT_GE(draft_tokens, drafts);
  EXPECT_GT(accepted, 0);
  EXPECT_LE(accepted, draft_tokens);
  EXPECT_GT(counter(m, "troupe:spec_decode_num_accepted_tokens_per_pos_total", "position=\"0\""), 0) << m;
  // The server without drafts has the counters at 0.
  auto plain_metrics = http::request("127.0.0.1", plain.port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(30));
  ASSERT_TRUE(plain_metrics.ok());
  EXPECT_EQ(counter(plain_metrics->body, "troupe:spec_decode_num_drafts_total"), 0);
}

}  // namespace
}  // namespace troupe
