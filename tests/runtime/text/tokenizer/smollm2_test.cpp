// The real SmolLM2 vocabulary (byte-level BPE, "smollm" pre-tokenizer).
// Needs TROUPE_TEST_MODEL=<path to SmolLM2-135M-Instruct GGUF>; skipped otherwise.
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

class SmolLm2 : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("TROUPE_TEST_MODEL");
    if (!path || !std::filesystem::exists(path)) {
      GTEST_SKIP() << "set TROUPE_TEST_MODEL to a SmolLM2-135M-Instruct GGUF to run this test";
    }
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    if ((*file)->get_string("tokenizer.ggml.pre").value_or("") != "smollm") {
      GTEST_SKIP() << path << " is not a SmolLM2 model";
    }
    auto tok = gguf::read_tokenizer(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tok_ = std::move(*tok);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SmolLm2, RoundTrips) {
  EXPECT_EQ(tok_->model_type(), "bpe");
  for (const char* text : {"What is the capital of France?", "  Numbers 1234 and spaces\n\n\tend",
                           "caf\xC3\xA9 \xF0\x9F\x98\x80 \xE4\xBD\xA0\xE5\xA5\xBD"}) {
    const auto ids = tok_->encode(text, true, false);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(tok_->decode(ids), text);
  }
  // add_bos_token is false in this GGUF: no BOS is added.
  const auto ids = tok_->encode("What is the capital of France?", true, false);
  EXPECT_NE(ids.front(), tok_->bos_id());
  // Digits are split one per token by the smollm pre-tokenizer.
  const auto digits = tok_->encode("2024", false, false);
  EXPECT_EQ(digits.size(), 4u);
}

// llama.cpp b11434 (libllama) on the corpus of tests/data/golden, and its flags.
TEST_F(SmolLm2, MatchesLlamaCpp) {
  testing::check_llamacpp_golden(*tok_, "smollm2");
  testing::check_llamacpp_vocab_flags(*tok_, "smollm2");
}

TEST_F(SmolLm2, SpecialTokens) {
  const auto im_start = tok_->token_id("<|im_start|>");
  const auto im_end = tok_->token_id("<|im_end|>");
  ASSERT_TRUE(im_start && im_end);
  EXPECT_EQ(*im_start, 1);
  EXPECT_EQ(*im_end, 2);
  const auto ids = tok_->encode("<|im_start|>user\n", false, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), *im_start);
  EXPECT_EQ(tok_->decode(ids, /*skip_special=*/false), "<|im_start|>user\n");
  EXPECT_EQ(tok_->decode(ids), "user\n");
  // Without parse_special the marker is plain text.
  const auto plain = tok_->encode("<|im_start|>user\n", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), *im_start), 0);
  EXPECT_GT(plain.size(), ids.size());
  // <|im_end|> (the EOS) and <|endoftext|> end generation.
  EXPECT_TRUE(tok_->is_eog(*im_end));
  EXPECT_TRUE(tok_->is_eog(0));
  EXPECT_FALSE(tok_->is_eog(*im_start));
  EXPECT_TRUE(tok_->is_special(*im_start));
}

}  // namespace
}  // namespace troupe::tokenizer
