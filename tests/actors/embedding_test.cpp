// all-MiniLM-L6-v2 through the engine as a pooling model: the Hugging Face
// folder, the WordPiece tokenizer, the BERT encoder on the CPU platform, mean
// pooling and normalization. Every golden embedding (Hugging Face
// transformers, fp32) is matched with cosine >= 0.9999.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <fstream>

#include "actors/engine.hpp"

namespace {

using troupe::engine::Engine;
using troupe::engine::EngineOptions;
using troupe::engine::GenerateRequest;

const char* minilm_dir() {
  const char* d = std::getenv("TROUPE_MINILM_DIR");
  return d && *d ? d : nullptr;
}

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ab += a[i] * b[i];
    aa += double(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

std::unique_ptr<Engine> start(const std::string& runner = "auto") {
  EngineOptions opts;
  opts.config.model.model_path = minilm_dir();
  opts.config.model.runner = runner;
  opts.config.parallel.num_threads = 2;
  opts.stat_log_interval_s = 0;
  auto engine = Engine::start(std::move(opts));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

TEST(Embeddings, MiniLMMatchesTheReferenceEmbeddings) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/test.sh sets it)";
  auto engine = start();
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->config().model.runner, "pooling");
  EXPECT_EQ(engine->config().model.max_model_len, 256);
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/minilm_embeddings.json");
  auto golden = nlohmann::json::parse(in);
  double worst = 1;
  for (const auto& c : golden["cases"]) {
    GenerateRequest req;
    req.prompt = c["text"].get<std::string>();
    req.pooling = troupe::engine::PoolingParams{};
    auto out = engine->generate(req);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(out->prompt_token_ids, c["input_ids"].get<std::vector<int32_t>>()) << req.prompt;
    ASSERT_EQ(out->embedding.size(), 384u);
    const double cos = cosine(out->embedding, c["embedding"].get<std::vector<double>>());
    worst = std::min(worst, cos);
    EXPECT_GE(cos, 0.9999) << req.prompt;
    double norm = 0;
    for (float v : out->embedding) norm += double(v) * v;
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  std::printf("MiniLM: worst cosine to the reference %.7f over %zu texts\n", worst, golden["cases"].size());
}

TEST(Embeddings, RequestsThePoolingRunnerCannotServeAreRefusedNamingIt) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set";
  auto engine = start();
  ASSERT_TRUE(engine);
  GenerateRequest gen;
  gen.prompt = "hello";
  auto r = engine->submit(gen, [](troupe::engine::RequestOutput) {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pooling model"), std::string::npos) << r.status().message();
  GenerateRequest too_long;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "word ";
  too_long.prompt = text;
  too_long.pooling = troupe::engine::PoolingParams{};
  auto t = engine->submit(too_long, [](troupe::engine::RequestOutput) {});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("maximum context length is 256"), std::string::npos) << t.status().message();
  too_long.truncate_prompt_tokens = 256;
  auto cut = engine->generate(too_long);
  ASSERT_TRUE(cut.ok()) << cut.status().to_string();
  EXPECT_EQ(cut->prompt_token_ids.size(), 256u);
  // An encoder never generates.
  EngineOptions opts;
  opts.config.model.model_path = minilm_dir();
  opts.config.model.runner = "generate";
  auto refused = Engine::start(std::move(opts));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--runner pooling"), std::string::npos) << refused.status().message();
}

TEST(Embeddings, ADecoderCanPoolItsLastToken) {
  EngineOptions opts;
  opts.config.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
  opts.config.model.runner = "pooling";
  opts.stat_log_interval_s = 0;
  auto engine = Engine::start(std::move(opts));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  GenerateRequest req;
  req.prompt = "Once upon a time";
  req.pooling = troupe::engine::PoolingParams{};
  auto a = (*engine)->generate(req);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(a->embedding.size(), 64u);  // stories260K's hidden size
  double norm = 0;
  for (float v : a->embedding) norm += double(v) * v;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  auto b = (*engine)->generate(req);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->embedding, b->embedding);
}

}  // namespace

namespace {

// The same sentence many times at once: a pooling model must not reuse cached
// prefixes (an encoder keeps no KV cache), and every copy gets the same vector.
TEST(Embeddings, RepeatedInputsAtOnceNeverHitAPrefixCache) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set";
  auto engine = start();
  ASSERT_TRUE(engine);
  std::vector<std::vector<float>> out(64);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < 64; ++i) {
    GenerateRequest req;
    // Longer than two KV blocks, so copies would share full blocks if prefix caching were on.
    req.prompt = i % 2 ? "The quick brown fox jumps over the lazy dog while the children in the garden watch the "
                         "storm clouds gather above the mountain and the old train leaves the station at night."
                       : "The quick brown fox.";
    req.pooling = troupe::engine::PoolingParams{};
    auto id = engine->submit(req, [&, i](troupe::engine::RequestOutput o) {
      if (!o.finished) return;
      std::lock_guard lock(mu);
      out[i] = o.embedding;
      ++done;
      cv.notify_all();
    });
    ASSERT_TRUE(id.ok()) << id.status().to_string();
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == 64; }));
  for (int i = 2; i < 64; ++i) EXPECT_EQ(out[i], out[i % 2]) << i;
  EXPECT_TRUE(engine->healthy()) << engine->unhealthy_reason();
}

}  // namespace
