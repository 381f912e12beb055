// all-MiniLM-L6-v2's tokenizer.json (TROUPE_MINILM_DIR, from
// scripts/fetch-model.sh all-MiniLM-L6-v2) against the reference: the
// golden input_ids of tests/data/golden/minilm_embeddings.json (transformers)
// and minilm_wordpiece_cases.json (Hugging Face tokenizers, ids and decode).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "runtime/text/tokenizer/tokenizer.hpp"

namespace troupe::tokenizer {
namespace {

const std::string kData = TROUPE_TEST_DATA_DIR;

std::unique_ptr<Tokenizer> load_minilm() {
  const char* dir = std::getenv("TROUPE_MINILM_DIR");
  if (dir == nullptr || *dir == '\0') return nullptr;
  auto tok = Tokenizer::from_tokenizer_json(std::string(dir) + "/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::move(*tok) : nullptr;
}

#define REQUIRE_MINILM(tok)                                                                        \
  if (std::getenv("TROUPE_MINILM_DIR") == nullptr || *std::getenv("TROUPE_MINILM_DIR") == '\0')   \
    GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/fetch-model.sh all-MiniLM-L6-v2)";       \
  ASSERT_NE(tok, nullptr)

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, false);
}

TEST(MiniLmTokenizer, Properties) {
  auto tok = load_minilm();
  REQUIRE_MINILM(tok);
  EXPECT_EQ(tok->model_type(), "wpm");
  EXPECT_EQ(tok->vocab_size(), 30522);
  EXPECT_EQ(tok->cls_id(), 101);
  EXPECT_EQ(tok->sep_id(), 102);
  EXPECT_EQ(tok->unk_id(), 100);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->token_id("[MASK]"), 103);
  EXPECT_EQ(tok->token_text(7592), "hello");
}

TEST(MiniLmTokenizer, GoldenInputIdsMatchExactly) {
  auto tok = load_minilm();
  REQUIRE_MINILM(tok);
  const auto golden = read_json(kData + "/golden/minilm_embeddings.json");
  ASSERT_TRUE(golden.is_object());
  const auto& cases = golden["cases"];
  ASSERT_EQ(cases.size(), 8u);
  int matched = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto want = c["input_ids"].get<std::vector<int32_t>>();
    const auto got = tok->encode(text, true, false);
    EXPECT_EQ(got, want) << text;
    matched += got == want;
  }
  EXPECT_EQ(matched, 8);
}

TEST(MiniLmTokenizer, MatchesHuggingFaceTokenizers) {
  auto tok = load_minilm();
  REQUIRE_MINILM(tok);
  const auto doc = read_json(kData + "/golden/minilm_wordpiece_cases.json");
  ASSERT_TRUE(doc.is_object());
  int ids_ok = 0, decode_ok = 0, n = 0;
  for (const auto& c : doc["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    // tokenizers always matches special tokens in the text: parse_special.
    const auto got = tok->encode(text, true, true);
    EXPECT_EQ(got, want) << "text: " << nlohmann::json(text).dump();
    ids_ok += got == want;
    const std::string decoded = tok->decode(want);
    EXPECT_EQ(decoded, c["decoded"].get<std::string>()) << "text: " << nlohmann::json(text).dump();
    decode_ok += decoded == c["decoded"].get<std::string>();
    ++n;
  }
  EXPECT_GE(n, 150);
  EXPECT_EQ(ids_ok, n);
  EXPECT_EQ(decode_ok, n);
}

}  // namespace
}  // namespace troupe::tokenizer
