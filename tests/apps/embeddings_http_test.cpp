// The embedding API of a real `troupe serve` on all-MiniLM-L6-v2 (a Hugging
// Face folder): /v1/embeddings in OpenAI's shape (strings, token ids, base64,
// usage), vLLM's /pooling and /score, and the errors in the OpenAI envelope.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;

const char* minilm_dir() {
  const char* d = std::getenv("TROUPE_MINILM_DIR");
  return d && *d ? d : nullptr;
}

class EmbeddingsApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!minilm_dir()) return;
    server_ = new ServeProcess({"--disable-log-stats"}, minilm_dir());
    healthy_ = server_->wait_healthy();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/test.sh sets it)";
    ASSERT_TRUE(healthy_) << server_->log();
  }
  static std::pair<int, json> post(const std::string& path, const json& body) {
    auto r = apps::http::request("127.0.0.1", server_->port(), "POST", path, body.dump(),
                                 {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
    if (!r.ok()) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  static json golden() {
    std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/minilm_embeddings.json");
    return json::parse(in);
  }
  static inline ServeProcess* server_ = nullptr;
  static inline bool healthy_ = false;
};

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

TEST_F(EmbeddingsApi, OpenAIShapeMatchesTheReference) {
  const auto g = golden();
  json input = json::array();
  for (const auto& c : g["cases"]) input.push_back(c["text"]);
  auto [status, body] = post("/v1/embeddings", {{"model", "all-MiniLM-L6-v2"}, {"input", input}});
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "all-MiniLM-L6-v2");
  ASSERT_EQ(body["data"].size(), g["cases"].size());
  int64_t tokens = 0;
  for (size_t i = 0; i < body["data"].size(); ++i) {
    const auto& d = body["data"][i];
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], i);
    EXPECT_GE(cosine(d["embedding"].get<std::vector<double>>(), g["cases"][i]["embedding"].get<std::vector<double>>()),
              0.9999);
    tokens += static_cast<int64_t>(g["cases"][i]["input_ids"].size());
  }
  EXPECT_EQ(body["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(body["usage"]["total_tokens"], tokens);
  // Pooling requests count in the metrics like any other (bounded wait: stats arrive with the step).
  bool counted = false;
  for (int i = 0; i < 50 && !counted; ++i) {
    auto m = apps::http::request("127.0.0.1", server_->port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(5));
    ASSERT_TRUE(m.ok());
    counted = m->body.find("troupe:request_success_total{") != std::string::npos &&
              m->body.find("troupe:prompt_tokens_total{") != std::string::npos;
    if (!counted) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(counted);
}

TEST_F(EmbeddingsApi, TokenIdsAndBase64GiveTheSameVector) {
  const auto c = golden()["cases"][0];
  auto [s1, as_text] = post("/v1/embeddings", {{"input", c["text"]}});
  auto [s2, as_ids] = post("/v1/embeddings", {{"input", c["input_ids"]}, {"encoding_format", "base64"}});
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(s2, 200) << as_ids.dump();
  // Decode base64 (little-endian float32) and compare bit for bit.
  const std::string b64 = as_ids["data"][0]["embedding"].get<std::string>();
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  for (size_t i = 0; i + 3 < b64.size(); i += 4) {
    uint32_t n = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char ch = b64[i + k];
      n <<= 6;
      if (ch == '=') ++pad;
      else n |= static_cast<uint32_t>(alphabet.find(ch));
    }
    bytes += static_cast<char>(n >> 16);
    if (pad < 2) bytes += static_cast<char>((n >> 8) & 255);
    if (pad < 1) bytes += static_cast<char>(n & 255);
  }
  const auto floats = as_text["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(bytes.size(), floats.size() * 4);
  for (size_t i = 0; i < floats.size(); ++i) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    EXPECT_EQ(f, floats[i]) << i;
  }
}

TEST_F(EmbeddingsApi, PoolingAndScore) {
  auto [s1, pooled] = post("/pooling", {{"input", "A man is eating food."}});
  ASSERT_EQ(s1, 200) << pooled.dump();
  EXPECT_EQ(pooled["data"][0]["object"], "pooling");
  EXPECT_EQ(pooled["data"][0]["data"].size(), 384u);
  auto [s2, scored] = post("/score", {{"text_1", "A man is eating food."},
                                      {"text_2", {"A man is eating a piece of bread.", "The girl is carrying a baby."}}});
  ASSERT_EQ(s2, 200) << scored.dump();
  ASSERT_EQ(scored["data"].size(), 2u);
  const double close = scored["data"][0]["score"], far = scored["data"][1]["score"];
  EXPECT_GT(close, far) << scored.dump();
  EXPECT_GT(close, 0.5);
  EXPECT_EQ(scored["data"][0]["object"], "score");
}

TEST_F(EmbeddingsApi, ErrorsUseTheOpenAIEnvelope) {
  auto expect_400 = [](int status, const json& body, const std::string& words) {
    EXPECT_EQ(status, 400) << body.dump();
    ASSERT_TRUE(body.contains("error")) << body.dump();
    EXPECT_EQ(body["error"]["code"], 400);
    EXPECT_NE(body["error"]["message"].get<std::string>().find(words), std::string::npos) << body.dump();
  };
  auto [s1, b1] = post("/v1/embeddings", {{"input", ""}});
  expect_400(s1, b1, "must not be empty");
  auto [s2, b2] = post("/v1/embeddings", {{"input", json::array()}});
  expect_400(s2, b2, "must not be empty");
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "word ";
  auto [s3, b3] = post("/v1/embeddings", {{"input", long_text}});
  expect_400(s3, b3, "maximum context length is 256");
  auto [s4, b4] = post("/v1/embeddings", {{"input", long_text}, {"truncate_prompt_tokens", 200}});
  EXPECT_EQ(s4, 200) << b4.dump();
  EXPECT_EQ(b4["usage"]["prompt_tokens"], 200);
  auto [s5, b5] = post("/v1/embeddings", {{"input", "hi"}, {"dimensions", 128}});
  expect_400(s5, b5, "dimensions");
  auto [s6, b6] = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}});
  expect_400(s6, b6, "pooling model");
  auto [s7, b7] = post("/v1/embeddings", {{"input", "hi"}, {"model", "other"}});
  EXPECT_EQ(s7, 404) << b7.dump();
}

TEST(EmbeddingsApiOnAGenerateModel, PoolingRequestsNameTheRunner) {
  ServeProcess server({"--disable-log-stats"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  auto r = apps::http::request("127.0.0.1", server.port(), "POST", "/v1/embeddings", R"({"input": "hi"})",
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("--runner pooling"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace troupe::tests
