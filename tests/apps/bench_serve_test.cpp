// `troupe bench serve`'s client against a real `troupe serve` process on
// 127.0.0.1 (stories260K): text prompts, token counts from the responses'
// usage fields (checked against the server's own /tokenize), fresh prompts
// per seed, and clear errors for a wrong URL or model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>

#include "apps/bench/bench_serve.hpp"
#include "apps/bench/text_prompts.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
namespace bench = apps::bench;
namespace http = apps::http;

TEST(TextPrompts, SameSeedSamePromptsOtherSeedOthers) {
  auto a = bench::make_text_prompts(11, 4, 30);
  auto b = bench::make_text_prompts(11, 4, 30);
  auto c = bench::make_text_prompts(12, 4, 30);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);
  std::set<std::string> distinct(a.begin(), a.end());
  distinct.insert(c.begin(), c.end());
  EXPECT_EQ(distinct.size(), 8u);  // every prompt of both runs differs
  for (const auto& p : a) EXPECT_EQ(std::count(p.begin(), p.end(), ' '), 29);
  EXPECT_EQ(bench::make_text_prompts(1, 1, 0)[0].find(' '), std::string::npos);  // at least one word
}

TEST(TextPrompts, WordsForTokens) {
  EXPECT_EQ(bench::words_for_tokens(128, 128, 256), 64);  // two tokens a word
  EXPECT_EQ(bench::words_for_tokens(128, 100, 125), 102);
  EXPECT_EQ(bench::words_for_tokens(128, 128, -1), 128);  // no usage: a token a word
  EXPECT_EQ(bench::words_for_tokens(1, 10, 1000), 1);
}

class BenchServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess({"--served-model-name", "stories", "--max-model-len", "256", "--max-num-seqs", "8",
                                "--disable-log-stats"});
    healthy_ = server_->wait_healthy();
    if (!healthy_) std::fprintf(stderr, "server log:\n%s\n", server_->log().c_str());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(healthy_) << "troupe serve did not become healthy"; }

  static bench::BenchOptions options() {
    bench::BenchOptions o;
    o.base_url = "http://127.0.0.1:" + std::to_string(server_->port());
    o.num_prompts = 6;
    o.max_concurrency = 3;
    o.random_input_len = 24;
    o.random_output_len = 10;
    o.timeout_s = 120;
    return o;
  }

  // Prompt tokens of a text as the server counts them (special tokens included, as in a completion).
  static int64_t server_tokens(const std::string& text) {
    json req = {{"model", "stories"}, {"prompt", text}};
    auto r = http::request("127.0.0.1", server_->port(), "POST", "/tokenize", req.dump(), {}, {},
                           std::chrono::seconds(30));
    EXPECT_TRUE(r.ok() && r->status == 200);
    if (!r.ok()) return -1;
    json j = json::parse(r->body, nullptr, false);
    return j.is_discarded() ? -1 : static_cast<int64_t>(j["tokens"].size());
  }

  static ServeProcess* server_;
  static bool healthy_;
};
ServeProcess* BenchServeTest::server_ = nullptr;
bool BenchServeTest::healthy_ = false;

TEST_F(BenchServeTest, CountsComeFromUsageAndMatchTheServersTokenizer) {
  auto o = options();
  o.seed = 42;
  o.result_file = "/tmp/troupe_bench_serve_test_" + std::to_string(::getpid()) + ".json";
  auto sum = bench::run_bench_serve(o);
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_EQ(sum->model, "stories");  // from /v1/models
  EXPECT_EQ(sum->seed, 42u);
  EXPECT_EQ(sum->completed, 6) << sum->first_error;
  EXPECT_EQ(sum->failed, 0);
  EXPECT_TRUE(sum->input_from_usage);
  EXPECT_TRUE(sum->output_from_usage);
  EXPECT_GT(sum->probe_prompt_tokens, 0);
  EXPECT_EQ(sum->output_tokens, 6 * 10);  // ignore_eos: every request runs to max_tokens

  // The prompts are reproducible from the seed; the server's own tokenizer agrees with usage.
  const auto prompts = bench::make_text_prompts(sum->seed, o.num_prompts, sum->prompt_words);
  ASSERT_EQ(sum->requests.size(), prompts.size());
  int64_t input = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& r = sum->requests[i];
    EXPECT_TRUE(r.success) << r.error;
    EXPECT_TRUE(r.prompt_len_from_usage);
    EXPECT_EQ(r.prompt_len, server_tokens(prompts[i])) << prompts[i];
    // Sized by the probe: near the 24 tokens asked for (word lengths in tokens vary).
    EXPECT_GE(r.prompt_len, 12);
    EXPECT_LE(r.prompt_len, 48);
    EXPECT_EQ(r.output_tokens, 10);
    EXPECT_GE(r.chunks, 1);
    EXPECT_LE(r.chunks, 10);
    EXPECT_EQ(r.itl.size(), static_cast<size_t>(r.chunks - 1));
    EXPECT_GT(r.ttft, 0);
    EXPECT_GE(r.latency, r.ttft);
    input += r.prompt_len;
  }
  EXPECT_EQ(sum->input_tokens, input);
  EXPECT_GT(sum->output_throughput, 0);
  EXPECT_GT(sum->ttft.median, 0);

  std::ifstream f(o.result_file);
  ASSERT_TRUE(f.good());
  json j = json::parse(f, nullptr, false);
  std::remove(o.result_file.c_str());
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["total_output_tokens"], 60);
  EXPECT_EQ(j["total_input_tokens"], input);
  EXPECT_EQ(j["output_tokens_from"], "usage");
  EXPECT_EQ(j["input_tokens_from"], "usage");
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["output_lens"].size(), 6u);
  EXPECT_TRUE(j.contains("median_itl_ms"));
  EXPECT_TRUE(j.contains("p99_ttft_ms"));
}

TEST_F(BenchServeTest, WithoutASeedEveryRunHasFreshPrompts) {
  auto o = options();
  o.num_prompts = 2;
  o.random_output_len = 2;
  auto a = bench::run_bench_serve(o);
  auto b = bench::run_bench_serve(o);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(a->completed, 2) << a->first_error;
  EXPECT_EQ(b->completed, 2) << b->first_error;
  EXPECT_NE(a->seed, b->seed);
  auto pa = bench::make_text_prompts(a->seed, 2, a->prompt_words);
  auto pb = bench::make_text_prompts(b->seed, 2, b->prompt_words);
  EXPECT_NE(pa[0], pb[0]);
}

TEST_F(BenchServeTest, UnknownModelIsAClearSetupError) {
  auto o = options();
  o.model = "no-such-model";
  auto sum = bench::run_bench_serve(o);
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("probe request"), std::string::npos) << sum.status().message();
  EXPECT_NE(sum.status().message().find("404"), std::string::npos) << sum.status().message();
}

TEST(BenchServe, NobodyListeningIsAClearErrorNotAHang) {
  bench::BenchOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(free_port());
  o.num_prompts = 1;
  auto sum = bench::run_bench_serve(o);
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("/v1/models"), std::string::npos) << sum.status().message();
}

TEST(BenchServe, BadOptionsAreRefused) {
  bench::BenchOptions o;
  o.num_prompts = 0;
  EXPECT_FALSE(bench::run_bench_serve(o).ok());
  o = {};
  o.random_input_len = 0;
  EXPECT_FALSE(bench::run_bench_serve(o).ok());
  o = {};
  o.timeout_s = 0;
  EXPECT_FALSE(bench::run_bench_serve(o).ok());
}

}  // namespace
}  // namespace troupe::tests
