// Exact agreement with llama.cpp b11434 on the real Qwen2 ("qwen2") and
// Llama 3 ("llama-bpe") vocabularies, and Qwen2's with Qwen3.5's pre-tokenizer
// ("qwen35"): llama.cpp's own vocab-only GGUFs, with
// its test strings and ids (tests/data/vocab) and the ids libllama gave on a
// wider corpus (tests/data/golden/llamacpp_tokenize_*.json, made by
// gen_llamacpp_tokenize_cases.py beside them).
// Needs TROUPE_VOCAB_DIR (scripts/fetch-vocab.sh prints it); skipped otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "llamacpp_golden.hpp"
#include "vocab_cases.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::tokenizer {
namespace {

const std::string kData = TROUPE_TEST_DATA_DIR;

class BpeVocab : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TROUPE_VOCAB_DIR");
    if (!dir || !*dir) GTEST_SKIP() << "set TROUPE_VOCAB_DIR (scripts/fetch-vocab.sh prints it) to run this test";
    const std::string path = std::string(dir) + "/ggml-vocab-" + GetParam() + ".gguf";
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing; run scripts/fetch-vocab.sh";
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto tok = gguf::read_tokenizer(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tok_ = std::move(*tok);
  }
  std::unique_ptr<Tokenizer> tok_;
};

// llama.cpp's test-tokenizer-0 strings: add_special=false, parse_special=false;
// byte-level BPE decodes back to the text.
TEST_P(BpeVocab, MatchesLlamaCppTestVectors) {
  const auto cases = testing::load_vocab_cases(kData + "/vocab/ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  for (const auto& c : cases) {
    const auto ids = tok_->encode(c.text, false, false);
    EXPECT_EQ(ids, c.ids) << "text: '" << c.text << "'\n got:" << testing::show_ids(ids) << "\nwant:" << testing::show_ids(c.ids);
    failures += ids != c.ids;
    EXPECT_EQ(tok_->decode(ids), c.text);
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
}

// The wider corpus: ids with and without special-token parsing, BOS as the
// vocabulary asks, and the text of the pieces.
TEST_P(BpeVocab, MatchesLlamaCppCorpus) { testing::check_llamacpp_golden(*tok_, GetParam()); }

TEST_P(BpeVocab, FlagsMatchLlamaCpp) { testing::check_llamacpp_vocab_flags(*tok_, GetParam()); }

INSTANTIATE_TEST_SUITE_P(LlamaCppVocab, BpeVocab, ::testing::Values("qwen2", "qwen35", "llama-bpe"),
                         [](const auto& info) -> std::string {
                           return info.param == "qwen2" ? "Qwen2" : info.param == "qwen35" ? "Qwen35" : "LlamaBpe";
                         });

}  // namespace
}  // namespace troupe::tokenizer
