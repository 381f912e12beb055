// Tokenizer edge cases: hand-built vocabularies, bad input, streaming decode.
#include <gtest/gtest.h>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/incremental_decoder.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/unicode.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::tokenizer {
namespace {

std::unique_ptr<Tokenizer> load(const std::string& name) {
  auto file = gguf::GgufFile::open(std::string(TROUPE_TEST_DATA_DIR) + "/vocab/ggml-vocab-" + name + ".gguf");
  if (!file.ok()) return nullptr;
  auto tok = gguf::read_tokenizer(**file);
  return tok.ok() ? std::move(*tok) : nullptr;
}

// A tiny SPM vocab: merges are driven by scores ("ab" beats "bc").
Vocab tiny_spm() {
  Vocab v;
  v.kind = VocabKind::spm;
  v.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "ab", "bc", "\xE2\x96\x81" "ab", "<0x21>"};
  v.scores = {0, 0, 0, -1, -1, -1, -1, -2, -3, -1.5f, 0};
  v.types = {TokenType::unknown, TokenType::control, TokenType::control, TokenType::normal, TokenType::normal,
             TokenType::normal, TokenType::normal, TokenType::normal, TokenType::normal, TokenType::normal,
             TokenType::byte};
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

TEST(TokenizerUnit, SpmMergesByScore) {
  auto tok = Tokenizer::from_vocab(tiny_spm());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  // "▁abc": ▁a is no token; "ab" (-2) beats "bc" (-3), then "▁ab" (-1.5).
  EXPECT_EQ((*tok)->encode("abc", true, false), (std::vector<int32_t>{1, 9, 6}));
  // '!' is only reachable through the byte token; 'd' has none and becomes <unk>.
  EXPECT_EQ((*tok)->encode("a!d", false, false), (std::vector<int32_t>{3, 4, 10, 0}));
  EXPECT_EQ((*tok)->decode({1, 9, 6, 10}), " abc!");
}

TEST(TokenizerUnit, BadVocabsAreErrors) {
  Vocab empty;
  EXPECT_EQ(Tokenizer::from_vocab(empty).status().code(), StatusCode::invalid_argument);
  Vocab v = tiny_spm();
  v.scores.pop_back();
  EXPECT_EQ(Tokenizer::from_vocab(v).status().code(), StatusCode::data_loss);
  Vocab b;
  b.kind = VocabKind::bpe;
  b.tokens = {"a", "b", "ab"};
  b.merges = {"ab"};  // no separator
  auto r = Tokenizer::from_vocab(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("merge 0"), std::string::npos);
  // Special ids past the vocabulary are dropped, not trusted.
  Vocab s = tiny_spm();
  s.bos_id = 1000;
  auto t = Tokenizer::from_vocab(s);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->bos_id(), -1);
  EXPECT_EQ((*t)->encode("a", true, false).front(), 3);  // no BOS to add
}

TEST(TokenizerUnit, UnknownPreTokenizerIsNamed) {
  auto r = parse_pre_tokenizer("deepseek-coder");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::not_supported);
  EXPECT_NE(r.status().message().find("deepseek-coder"), std::string::npos);
}

TEST(TokenizerUnit, BadIdsAndBytesNeverCrash) {
  auto tok = load("gpt-2");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->token_to_piece(-1), "");
  EXPECT_EQ(tok->token_to_piece(1 << 30), "");
  EXPECT_EQ(tok->decode({-7, 50257, 15496}), "Hello");
  // Byte-level BPE, as llama.cpp: every invalid UTF-8 byte becomes U+FFFD; the rest is kept.
  static const char kJunk[] = "\xFF\xFE abc \xC3 \xE2\x82 \x00 end";
  const std::string junk(kJunk, sizeof(kJunk) - 1);  // keeps the NUL byte
  static const char kReplaced[] = "\uFFFD\uFFFD abc \uFFFD \uFFFD\uFFFD \x00 end";
  EXPECT_EQ(tok->decode(tok->encode(junk, false, false)), std::string(kReplaced, sizeof(kReplaced) - 1));
  auto spm = load("llama-spm");
  ASSERT_NE(spm, nullptr);
  // SPM groups bytes by their lead byte as llama.cpp does, so a broken sequence may
  // swallow the next '▁'; bytes are still covered by <0xNN> fallback tokens.
  const std::string back = spm->decode(spm->encode(junk, false, false));
  EXPECT_NE(back.find("\xFF\xFE"), std::string::npos);
  EXPECT_NE(back.find(" end"), std::string::npos);
}

TEST(TokenizerUnit, LongInputs) {
  auto tok = load("gpt-2");
  ASSERT_NE(tok, nullptr);
  const std::string text(20000, 'a');
  const auto ids = tok->encode(text, false, false);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(tok->decode(ids), text);
  const std::string spaces(5000, ' ');
  EXPECT_EQ(tok->decode(tok->encode(spaces + "x", false, false)), spaces + "x");
}

TEST(TokenizerUnit, IncrementalDecoderNeverSplitsCharacters) {
  for (const char* name : {"llama-spm", "gpt-2"}) {
    auto tok = load(name);
    ASSERT_NE(tok, nullptr) << name;
    // Emoji and CJK become several byte tokens in both vocabularies.
    const std::string text = "Hi \xF0\x9F\x98\x80 \xE4\xBD\xA0\xE5\xA5\xBD caf\xC3\xA9 \xF0\x9F\xA6\x99!";
    const auto ids = tok->encode(text, true, false);
    IncrementalDecoder dec(*tok);
    std::string streamed;
    int partial_steps = 0;
    for (int32_t id : ids) {
      const std::string piece = dec.push(id);
      EXPECT_EQ(utf8_complete_prefix(piece), piece.size());
      // Every emitted piece ends on a character boundary.
      if (!piece.empty()) {
        const auto last = static_cast<unsigned char>(piece.back());
        EXPECT_TRUE(last < 0x80 || (last & 0xC0) == 0x80) << name;
      } else {
        ++partial_steps;
      }
      streamed += piece;
    }
    streamed += dec.flush();
    EXPECT_EQ(streamed, tok->decode(ids)) << name;
    EXPECT_GT(partial_steps, 0) << name << ": expected some tokens to hold back partial characters";
  }
}

TEST(TokenizerUnit, IncrementalDecoderFlushesUnfinishedCharacter) {
  auto tok = load("llama-spm");
  ASSERT_NE(tok, nullptr);
  const auto f0 = tok->token_id("<0xF0>");
  ASSERT_TRUE(f0.has_value());
  IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push(*f0), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.flush(), "");
  // Special tokens are hidden unless asked for.
  EXPECT_EQ(dec.push(2), "");
  IncrementalDecoder shown(*tok, /*skip_special=*/false);
  EXPECT_EQ(shown.push(2), "</s>");
}

}  // namespace
}  // namespace troupe::tokenizer
