// The embedding API of a real `troupe serve` on all-MiniLM-L6-v2 (a Hugging
// Face folder): /v1/embeddings in OpenAI's shape (strings, token ids, base64,
// usage), vLLM's /pooling, /score, /v1/score, /rerank (and /v1/, /v2/) and /ping,
// and the errors in the OpenAI envelope.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

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
  static std::pair<int, json> get(const std::string& method, const std::string& path) {
    auto r = apps::http::request("127.0.0.1", server_->port(), method, path, "", {}, {}, std::chrono::seconds(10));
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
  // As with vLLM, a folder is served under its path as given.
  auto [status, body] = post("/v1/embeddings", {{"model", minilm_dir()}, {"input", input}});
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], minilm_dir());
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

// truncate_prompt_tokens keeps [CLS] and [SEP] and cuts the text between them (Hugging Face's
// and vLLM's truncation, side right for pooling): the same vector as the ids
// [CLS] + the first N-2 text tokens + [SEP].
TEST_F(EmbeddingsApi, TruncationKeepsClsAndSep) {
  std::string text;
  for (int i = 0; i < 50; ++i)
    text += "The quick brown fox number " + std::to_string(i) + " jumps over the lazy dog. ";  // ~400 words
  auto [st, tokenized] = post("/tokenize", {{"prompt", text}});
  ASSERT_EQ(st, 200) << tokenized.dump();
  const auto full = tokenized["tokens"].get<std::vector<int64_t>>();
  ASSERT_GT(full.size(), 300u);
  ASSERT_EQ(full.front(), 101);  // [CLS]
  ASSERT_EQ(full.back(), 102);   // [SEP]
  std::vector<int64_t> want(full.begin(), full.begin() + 255);  // [CLS] + 254 text tokens
  want.push_back(full.back());

  auto [s1, cut] = post("/v1/embeddings", {{"input", text}, {"truncate_prompt_tokens", 256}});
  ASSERT_EQ(s1, 200) << cut.dump();
  EXPECT_EQ(cut["usage"]["prompt_tokens"], 256);
  auto [s2, ids] = post("/v1/embeddings", {{"input", want}});
  ASSERT_EQ(s2, 200) << ids.dump();
  EXPECT_EQ(ids["usage"]["prompt_tokens"], 256);
  const auto a = cut["data"][0]["embedding"].get<std::vector<double>>();
  const auto b = ids["data"][0]["embedding"].get<std::vector<double>>();
  EXPECT_GE(cosine(a, b), 0.9999);
  // -1 is the model's maximum length (256 here): the same cut.
  auto [s3, max] = post("/v1/embeddings", {{"input", text}, {"truncate_prompt_tokens", -1}});
  ASSERT_EQ(s3, 200) << max.dump();
  EXPECT_EQ(max["usage"]["prompt_tokens"], 256);
  EXPECT_GE(cosine(a, max["data"][0]["embedding"].get<std::vector<double>>()), 0.9999);
  // Token ids carry no marked special tokens: the first N are kept.
  auto [s4, first] = post("/v1/embeddings", {{"input", full}, {"truncate_prompt_tokens", 200}});
  ASSERT_EQ(s4, 200) << first.dump();
  auto [s5, head] = post("/v1/embeddings", {{"input", std::vector<int64_t>(full.begin(), full.begin() + 200)}});
  ASSERT_EQ(s5, 200) << head.dump();
  EXPECT_GE(cosine(first["data"][0]["embedding"].get<std::vector<double>>(),
                   head["data"][0]["embedding"].get<std::vector<double>>()),
            0.9999);
  // Beyond the model's length, 0, -2, or fewer than the two special tokens: a 400 naming the field.
  for (const json& bad : {json(257), json(0), json(-2), json(1)}) {
    auto [sb, err] = post("/v1/embeddings", {{"input", text}, {"truncate_prompt_tokens", bad}});
    EXPECT_EQ(sb, 400) << bad << ": " << err.dump();
    EXPECT_EQ(err["error"]["param"], "truncate_prompt_tokens") << err.dump();
  }
}

const char* const kQuery = "How do I bake bread at home?";
const std::vector<std::string> kDocs = {
    "The stock market fell sharply today.",
    "Knead the dough, let it rise, then bake it at 220 C.",
    "Cats sleep for most of the day.",
    "A simple loaf needs flour, water, salt and yeast.",
    "The train to Lyon leaves at nine.",
};

// The cosine of the query's /v1/embeddings vector with each document's.
std::vector<double> embedding_cosines(const std::function<std::pair<int, json>(const std::string&, const json&)>& post,
                                      int64_t* tokens) {
  json input = json::array({kQuery});
  for (const auto& d : kDocs) input.push_back(d);
  auto [status, body] = post("/v1/embeddings", {{"input", input}});
  EXPECT_EQ(status, 200) << body.dump();
  if (status != 200) return {};
  *tokens = body["usage"]["prompt_tokens"].get<int64_t>();
  const auto q = body["data"][0]["embedding"].get<std::vector<double>>();
  std::vector<double> out;
  for (size_t i = 0; i < kDocs.size(); ++i)
    out.push_back(cosine(q, body["data"][i + 1]["embedding"].get<std::vector<double>>()));
  return out;
}

TEST_F(EmbeddingsApi, RerankScoresAreTheCosinesOfTheEmbeddingsSortedDescending) {
  int64_t tokens = 0;
  const auto cosines = embedding_cosines(post, &tokens);
  ASSERT_EQ(cosines.size(), kDocs.size());
  std::vector<size_t> order(kDocs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cosines[a] > cosines[b]; });
  // The two baking texts lead, so the order is neither the input order nor its reverse.
  ASSERT_TRUE((order[0] == 1 && order[1] == 3) || (order[0] == 3 && order[1] == 1));
  for (size_t k = 1; k < order.size(); ++k) ASSERT_GT(cosines[order[k - 1]] - cosines[order[k]], 1e-4);

  auto [status, body] = post("/rerank", {{"model", minilm_dir()}, {"query", kQuery}, {"documents", kDocs}});
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["model"], minilm_dir());
  EXPECT_TRUE(body["id"].is_string() && !body["id"].get<std::string>().empty()) << body.dump();
  EXPECT_EQ(body["usage"]["total_tokens"], tokens);
  const json& results = body["results"];
  ASSERT_EQ(results.size(), kDocs.size()) << body.dump();
  for (size_t k = 0; k < results.size(); ++k) {
    const size_t index = results[k]["index"].get<size_t>();
    EXPECT_EQ(index, order[k]) << body.dump();
    ASSERT_LT(index, kDocs.size());
    EXPECT_NEAR(results[k]["relevance_score"].get<double>(), cosines[index], 1e-5) << k;
    EXPECT_EQ(results[k]["document"]["text"], kDocs[index]);
  }
}

TEST_F(EmbeddingsApi, RerankHonoursTopNAndReturnDocuments) {
  auto [s1, all] = post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}});
  ASSERT_EQ(s1, 200) << all.dump();
  ASSERT_EQ(all["results"].size(), kDocs.size());
  auto [s2, top2] = post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}, {"top_n", 2}, {"return_documents", false}});
  ASSERT_EQ(s2, 200) << top2.dump();
  ASSERT_EQ(top2["results"].size(), 2u) << top2.dump();
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(top2["results"][k]["index"], all["results"][k]["index"]);
    EXPECT_NEAR(top2["results"][k]["relevance_score"].get<double>(), all["results"][k]["relevance_score"].get<double>(), 1e-6);
    EXPECT_FALSE(top2["results"][k].contains("document")) << top2.dump();
  }
  // The two kept are the two best of all five.
  std::vector<double> scores;
  for (const auto& r : all["results"]) scores.push_back(r["relevance_score"].get<double>());
  std::sort(scores.rbegin(), scores.rend());
  EXPECT_NEAR(top2["results"][0]["relevance_score"].get<double>(), scores[0], 1e-6);
  EXPECT_NEAR(top2["results"][1]["relevance_score"].get<double>(), scores[1], 1e-6);
  // Usage counts every text embedded, whatever top_n keeps.
  EXPECT_EQ(top2["usage"]["total_tokens"], all["usage"]["total_tokens"]);
  auto [s3, many] = post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}, {"top_n", 50}});
  ASSERT_EQ(s3, 200) << many.dump();
  EXPECT_EQ(many["results"].size(), kDocs.size());
  auto [s4, zero] = post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}, {"top_n", 0}});
  ASSERT_EQ(s4, 200) << zero.dump();
  EXPECT_EQ(zero["results"].size(), kDocs.size());
}

TEST_F(EmbeddingsApi, TheRerankPathsAndDocumentFormsAgree) {
  json objects = json::array();
  for (const auto& d : kDocs) objects.push_back({{"text", d}});
  std::vector<json> answers;
  for (const auto& [path, docs] : std::vector<std::pair<std::string, json>>{
           {"/rerank", kDocs}, {"/v1/rerank", kDocs}, {"/v2/rerank", kDocs}, {"/v2/rerank", objects}}) {
    auto [status, body] = post(path, {{"query", kQuery}, {"documents", docs}, {"top_n", 3}});
    ASSERT_EQ(status, 200) << path << ": " << body.dump();
    ASSERT_EQ(body["results"].size(), 3u) << path;
    answers.push_back(body);
  }
  for (size_t a = 1; a < answers.size(); ++a) {
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(answers[a]["results"][k]["index"], answers[0]["results"][k]["index"]) << a;
      EXPECT_NEAR(answers[a]["results"][k]["relevance_score"].get<double>(),
                  answers[0]["results"][k]["relevance_score"].get<double>(), 1e-6) << a;
      EXPECT_EQ(answers[a]["results"][k]["document"], answers[0]["results"][k]["document"]) << a;
    }
    EXPECT_EQ(answers[a]["usage"], answers[0]["usage"]) << a;
  }
}

TEST_F(EmbeddingsApi, PingAndV1Score) {
  EXPECT_EQ(get("GET", "/ping").first, 200);
  EXPECT_EQ(get("POST", "/ping").first, 200);
  auto [s_put, put] = get("PUT", "/ping");
  EXPECT_EQ(s_put, 405) << put.dump();
  EXPECT_TRUE(put.contains("error")) << put.dump();
  const json body = {{"text_1", kQuery}, {"text_2", {kDocs[0], kDocs[1]}}};
  auto [s1, score] = post("/score", body);
  auto [s2, v1] = post("/v1/score", body);
  ASSERT_EQ(s1, 200) << score.dump();
  ASSERT_EQ(s2, 200) << v1.dump();
  ASSERT_EQ(v1["data"].size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(v1["data"][i]["score"].get<double>(), score["data"][i]["score"].get<double>(), 1e-6);
  EXPECT_GT(v1["data"][1]["score"].get<double>(), v1["data"][0]["score"].get<double>()) << v1.dump();
  EXPECT_EQ(get("GET", "/v1/score").first, 405);
}

TEST_F(EmbeddingsApi, RerankBadBodiesAre400sNamingTheField) {
  auto expect_400 = [](const std::string& path, const json& request, const std::string& param) {
    auto [status, body] = post(path, request);
    EXPECT_EQ(status, 400) << request.dump() << " -> " << body.dump();
    ASSERT_TRUE(body.contains("error")) << body.dump();
    EXPECT_EQ(body["error"]["code"], 400);
    EXPECT_EQ(body["error"]["type"], "BadRequestError");
    EXPECT_EQ(body["error"]["param"], param) << body.dump();
    EXPECT_NE(body["error"]["message"].get<std::string>().find(param), std::string::npos) << body.dump();
  };
  for (const char* path : {"/rerank", "/v1/rerank", "/v2/rerank"}) {
    expect_400(path, {{"documents", kDocs}}, "query");
    expect_400(path, {{"query", ""}, {"documents", kDocs}}, "query");
    expect_400(path, {{"query", kQuery}}, "documents");
    expect_400(path, {{"query", kQuery}, {"documents", json::array()}}, "documents");
    expect_400(path, {{"query", kQuery}, {"documents", {"fine", 42}}}, "documents");
    expect_400(path, {{"query", kQuery}, {"documents", {"fine", {{"title", "no text"}}}}}, "documents");
    expect_400(path, {{"query", kQuery}, {"documents", kDocs}, {"top_n", -1}}, "top_n");
    expect_400(path, {{"query", kQuery}, {"documents", kDocs}, {"return_documents", "no"}}, "return_documents");
  }
  auto r = apps::http::request("127.0.0.1", server_->port(), "POST", "/v1/rerank", "{\"query\": ",
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("\"error\""), std::string::npos) << r->body;
  auto [s_model, b_model] = post("/v2/rerank", {{"model", "other"}, {"query", kQuery}, {"documents", kDocs}});
  EXPECT_EQ(s_model, 404) << b_model.dump();
  EXPECT_EQ(b_model["error"]["code"], 404) << b_model.dump();
}

TEST(EmbeddingsApiOnAGenerateModel, PoolingRequestsNameTheRunner) {
  ServeProcess server({"--disable-log-stats"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  auto r = apps::http::request("127.0.0.1", server.port(), "POST", "/v1/embeddings", R"({"input": "hi"})",
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("--runner pooling"), std::string::npos) << r->body;
  // /rerank and /v1/score refuse the same way; /ping answers like /health.
  for (const char* path : {"/rerank", "/v2/rerank", "/v1/score"}) {
    const std::string body = std::string(path).find("score") != std::string::npos
                                 ? R"({"text_1": "a", "text_2": "b"})"
                                 : R"({"query": "a", "documents": ["b"]})";
    auto p = apps::http::request("127.0.0.1", server.port(), "POST", path, body,
                                 {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->status, 400) << path << ": " << p->body;
    EXPECT_NE(p->body.find("--runner pooling"), std::string::npos) << path << ": " << p->body;
  }
  for (const char* method : {"GET", "POST"}) {
    auto p = apps::http::request("127.0.0.1", server.port(), method, "/ping", "", {}, {}, std::chrono::seconds(10));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->status, 200) << method << " " << p->body;
  }
}

}  // namespace
}  // namespace troupe::tests
