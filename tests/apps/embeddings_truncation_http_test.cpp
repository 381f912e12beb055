// truncate_prompt_tokens on a real `troupe serve` of all-MiniLM-L6-v2 against an outside
// reference: ~400-word texts cut to 256 tokens give sentence-transformers' embeddings
// (max_seq_length 256: [CLS] + the first 254 text tokens + [SEP]) at cosine >= 0.9999, with
// the folder's mean pooling and with CLS pooling. The reference is
// tests/data/golden/minilm_long_embeddings.json (gen_minilm_long_cases.py: float64 numpy BERT
// and Hugging Face `tokenizers`, checked against transformers' short-text goldens).
//
// CLS pooling is selected the way sentence-transformers and vLLM read it from a model folder:
// 1_Pooling/config.json with pooling_mode_cls_token. The CLS server serves a copy of the folder
// (its files linked) whose pooling config says so; troupe has no serve flag or request field
// for the pooling type (vLLM's --pooler-config is not implemented).
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const char* minilm_dir() {
  const char* d = std::getenv("TROUPE_MINILM_DIR");
  return d && *d ? d : nullptr;
}

json reference() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/minilm_long_embeddings.json");
  return json::parse(in);
}

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return 0;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

std::pair<int, json> post(const ServeProcess& server, const std::string& path, const json& body) {
  auto r = apps::http::request("127.0.0.1", server.port(), "POST", path, body.dump(),
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(120));
  if (!r.ok()) return {0, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

// A copy of the MiniLM folder whose pooling module is sentence-transformers' CLS pooling:
// every entry linked except 1_Pooling, written with pooling_mode_cls_token.
fs::path cls_pooling_folder(const fs::path& minilm) {
  const fs::path dir = fs::temp_directory_path() / ("troupe-minilm-cls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "1_Pooling");
  for (const auto& e : fs::directory_iterator(minilm))
    if (e.path().filename() != "1_Pooling") fs::create_symlink(fs::absolute(e.path()), dir / e.path().filename());
  std::ofstream(dir / "1_Pooling" / "config.json")
      << json{{"word_embedding_dimension", 384},     {"pooling_mode_cls_token", true},
              {"pooling_mode_mean_tokens", false},   {"pooling_mode_max_tokens", false},
              {"pooling_mode_mean_sqrt_len_tokens", false}}
             .dump();
  return dir;
}

class LongTextTruncation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!minilm_dir()) return;
    cls_dir_ = cls_pooling_folder(minilm_dir());
    mean_ = std::make_unique<ServeProcess>(std::vector<std::string>{"--disable-log-stats"}, minilm_dir());
    cls_ = std::make_unique<ServeProcess>(std::vector<std::string>{"--disable-log-stats"}, cls_dir_.string());
    mean_healthy_ = mean_->wait_healthy();
    cls_healthy_ = cls_->wait_healthy();
  }
  static void TearDownTestSuite() {
    mean_.reset();
    cls_.reset();
    if (!cls_dir_.empty()) fs::remove_all(cls_dir_);
  }
  void SetUp() override {
    if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/test.sh sets it)";
  }

  // Each reference text through /v1/embeddings with truncate_prompt_tokens 256, against the
  // reference vector `key` ("mean" or "cls").
  static void expect_matches(const ServeProcess& server, const std::string& key) {
    const json ref = reference();
    ASSERT_EQ(ref["cases"].size(), 3u);
    for (size_t i = 0; i < ref["cases"].size(); ++i) {
      const json& c = ref["cases"][i];
      const std::string text = c["text"];
      const std::string what = key + " pooling, text " + std::to_string(i);
      // troupe's tokenizer gives the reference's ids: the truncated input is [CLS] + its first
      // 254 text tokens + [SEP].
      auto [st, tokenized] = post(server, "/tokenize", {{"prompt", text}});
      ASSERT_EQ(st, 200) << tokenized.dump();
      auto ids = tokenized["tokens"].get<std::vector<int64_t>>();
      EXPECT_EQ(static_cast<int64_t>(ids.size()), c["full_tokens"].get<int64_t>()) << what;
      if (ids.size() > 256) ids.erase(ids.begin() + 255, ids.end() - 1);
      EXPECT_EQ(ids, c["input_ids"].get<std::vector<int64_t>>()) << what;

      auto [status, body] = post(server, "/v1/embeddings", {{"input", text}, {"truncate_prompt_tokens", 256}});
      ASSERT_EQ(status, 200) << what << ": " << body.dump();
      EXPECT_EQ(body["usage"]["prompt_tokens"], 256) << what;
      const double cos = cosine(body["data"][0]["embedding"].get<std::vector<double>>(),
                                c[key].get<std::vector<double>>());
      EXPECT_GE(cos, 0.9999) << what;
      std::printf("%s: cosine %.12f (1 - cosine %.1e)\n", what.c_str(), cos, 1 - cos);
      // The other pooling's vector is far: the test tells the two apart.
      const std::string other = key == "mean" ? "cls" : "mean";
      EXPECT_LT(cosine(body["data"][0]["embedding"].get<std::vector<double>>(), c[other].get<std::vector<double>>()),
                0.9)
          << what;
    }
  }

  static inline fs::path cls_dir_;
  static inline std::unique_ptr<ServeProcess> mean_, cls_;
  static inline bool mean_healthy_ = false, cls_healthy_ = false;
};

TEST_F(LongTextTruncation, MeanPoolingMatchesSentenceTransformers) {
  ASSERT_TRUE(mean_healthy_) << mean_->log();
  expect_matches(*mean_, "mean");
}

TEST_F(LongTextTruncation, ClsPoolingMatchesSentenceTransformers) {
  ASSERT_TRUE(cls_healthy_) << cls_->log();
  expect_matches(*cls_, "cls");
}

}  // namespace
}  // namespace troupe::tests
