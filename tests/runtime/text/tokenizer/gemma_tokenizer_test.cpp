// The real Gemma 3 vocabulary (SentencePiece BPE, 262144 tokens, byte
// fallback, no dummy space prefix, user-defined whitespace and newline runs)
// against llama.cpp b11434: the ids libllama gave on a varied corpus
// (tests/data/golden/llamacpp_tokenize_gemma3.json) and the vocabulary's flags.
// Needs TROUPE_GEMMA_MODEL (scripts/fetch-model.sh gemma-3-270m prints it); skipped otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "llamacpp_golden.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::tokenizer {
namespace {

class Gemma3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("TROUPE_GEMMA_MODEL");
    if (!path || !*path) return;
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto tok = gguf::read_tokenizer(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tok_ = std::move(*tok).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "set TROUPE_GEMMA_MODEL (scripts/fetch-model.sh gemma-3-270m prints it) to run this test";
  }
  static Tokenizer* tok_;  // loaded once: 262144 tokens
};
Tokenizer* Gemma3::tok_ = nullptr;

TEST_F(Gemma3, MatchesLlamaCppCorpus) { testing::check_llamacpp_golden(*tok_, "gemma3"); }

TEST_F(Gemma3, FlagsMatchLlamaCpp) { testing::check_llamacpp_vocab_flags(*tok_, "gemma3"); }

TEST_F(Gemma3, VocabularyFlags) {
  EXPECT_EQ(tok_->model_type(), "spm");
  EXPECT_EQ(tok_->vocab_size(), 262144);
  EXPECT_EQ(tok_->bos_id(), 2);
  EXPECT_EQ(tok_->eos_id(), 1);
  EXPECT_EQ(tok_->unk_id(), 3);
  EXPECT_EQ(tok_->pad_id(), 0);
  EXPECT_TRUE(tok_->add_bos());
  EXPECT_FALSE(tok_->vocab().add_space_prefix);  // no dummy prefix: "Hello" is not " Hello"
  const auto end_of_turn = tok_->token_id("<end_of_turn>");
  ASSERT_TRUE(end_of_turn);
  EXPECT_TRUE(tok_->is_eog(*end_of_turn));
  EXPECT_TRUE(tok_->is_eog(1));
  EXPECT_FALSE(tok_->is_eog(2));
  EXPECT_TRUE(tok_->is_special(*end_of_turn));
  // BOS only when asked; "<start_of_turn>" is one token only with parse_special.
  const auto with_bos = tok_->encode("Hello", true, false);
  ASSERT_EQ(with_bos.size(), 2u);
  EXPECT_EQ(with_bos[0], 2);
  EXPECT_EQ(tok_->encode("Hello", false, false), std::vector<int32_t>{with_bos[1]});
  const auto start = tok_->token_id("<start_of_turn>");
  ASSERT_TRUE(start);
  EXPECT_EQ(tok_->encode("<start_of_turn>", false, true), std::vector<int32_t>{*start});
  EXPECT_GT(tok_->encode("<start_of_turn>", false, false).size(), 1u);
  // Runs of spaces and newlines are user-defined tokens, matched before BPE.
  const auto spaces = tok_->token_id("    ");
  ASSERT_TRUE(spaces);
  EXPECT_EQ(tok_->encode("    ", false, false), std::vector<int32_t>{*spaces});
  // Byte fallback: a character outside the vocabulary is its UTF-8 bytes, which decode back.
  const std::string rare = "\xF0\x9F\xAB\xA8";  // U+1FAE8
  const auto ids = tok_->encode(rare, false, false);
  EXPECT_EQ(tok_->decode(ids), rare);
}

TEST_F(Gemma3, DecodesWhatItEncodes) {
  for (const char* text : {"Hello, world!", "  two  spaces\n\n\nthree newlines", "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD",
                           "def f(x):\n    return x\n"}) {
    EXPECT_EQ(tok_->decode(tok_->encode(text, true, false)), text) << text;
  }
}

}  // namespace
}  // namespace troupe::tokenizer
