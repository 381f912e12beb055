// Exact agreement with llama.cpp's tokenizer on its own test vocabularies (its
// test vectors and a wider corpus) and on the stories260K golden prompts.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "llamacpp_golden.hpp"
#include "vocab_cases.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::tokenizer {
namespace {

const std::string kData = TROUPE_TEST_DATA_DIR;

std::unique_ptr<Tokenizer> load(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return nullptr;
  auto tok = gguf::read_tokenizer(**file);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  if (!tok.ok()) return nullptr;
  return std::move(*tok);
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s += ' ';
    s += std::to_string(id);  // appended in two steps: g++ 12 warns (-Wrestrict) on " " + to_string
  }
  return s;
}

enum class Roundtrip { lossless, spm_prefix, none };

void check_vocab(const std::string& name, Roundtrip roundtrip) {
  const std::string base = kData + "/vocab/ggml-vocab-" + name + ".gguf";
  auto tok = load(base);
  ASSERT_NE(tok, nullptr);
  const auto cases = testing::load_vocab_cases(base);
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  for (const auto& c : cases) {
    // llama.cpp's test-tokenizer-0: add_special=false, parse_special=false.
    const auto ids = tok->encode(c.text, false, false);
    EXPECT_EQ(ids, c.ids) << "text: '" << c.text << "'\n got:" << show(ids) << "\nwant:" << show(c.ids);
    failures += ids != c.ids;
    if (roundtrip == Roundtrip::lossless) {
      EXPECT_EQ(tok->decode(ids), c.text);
    } else if (roundtrip == Roundtrip::spm_prefix && !c.text.empty()) {
      EXPECT_EQ(tok->decode(ids), " " + c.text);  // SPM dummy prefix
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
}

TEST(TokenizerVocab, LlamaSpmMatchesLlamaCpp) { check_vocab("llama-spm", Roundtrip::spm_prefix); }

// llama.cpp b11434 (libllama) on the wider corpus of tests/data/golden, and the
// flags it gives these vocabularies on loading.
TEST(TokenizerVocab, MatchesLlamaCppCorpus) {
  for (const char* name : {"llama-spm", "gpt-2", "bert-bge"}) {
    SCOPED_TRACE(name);
    auto tok = load(kData + "/vocab/ggml-vocab-" + name + ".gguf");
    ASSERT_NE(tok, nullptr);
    testing::check_llamacpp_golden(*tok, name);
    testing::check_llamacpp_vocab_flags(*tok, name);
  }
}
TEST(TokenizerVocab, Gpt2MatchesLlamaCpp) { check_vocab("gpt-2", Roundtrip::lossless); }
// WordPiece lowercases and drops accents: no round trip.
TEST(TokenizerVocab, BertBgeMatchesLlamaCpp) { check_vocab("bert-bge", Roundtrip::none); }

TEST(TokenizerVocab, LlamaSpmProperties) {
  auto tok = load(kData + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_type(), "spm");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_FALSE(tok->is_special(15043));
  EXPECT_EQ(tok->token_id("<s>"), 1);
  EXPECT_EQ(tok->token_id("no-such-token"), std::nullopt);
  // add_special adds BOS; parse_special turns "</s>" into its id, else it is text.
  EXPECT_EQ(tok->encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
  const auto parsed = tok->encode("Hello</s>", false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.back(), 2);
  const auto unparsed = tok->encode("Hello</s>", false, false);
  EXPECT_EQ(std::count(unparsed.begin(), unparsed.end(), 2), 0);
  // Pieces: '▁' -> ' ', <0x0A> -> '\n', control text only when asked for.
  EXPECT_EQ(tok->token_to_piece(15043), " Hello");
  EXPECT_EQ(tok->token_to_piece(13), "\n");
  EXPECT_EQ(tok->token_to_piece(2, true), "</s>");
  EXPECT_EQ(tok->token_to_piece(2, false), "");
  EXPECT_EQ(tok->decode({1, 15043, 3186, 2}), " Hello world");
  EXPECT_EQ(tok->decode({1, 15043, 3186, 2}, false), "<s> Hello world</s>");
}

TEST(TokenizerVocab, Gpt2Properties) {
  auto tok = load(kData + "/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_type(), "bpe");
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_TRUE(tok->is_eog(50256));
  // gpt-2 adds no BOS; <|endoftext|> parses only with parse_special.
  EXPECT_EQ(tok->encode("Hello world", true, false), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok->encode("a<|endoftext|>", false, true), (std::vector<int32_t>{64, 50256}));
  EXPECT_NE(tok->encode("a<|endoftext|>", false, false).back(), 50256);
}

TEST(TokenizerVocab, Stories260kGoldenPrompts) {
  auto tok = load(kData + "/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  std::ifstream f(kData + "/golden/stories260K_llamacpp.json");
  const auto golden = nlohmann::json::parse(f);
  ASSERT_FALSE(golden["cases"].empty());
  for (const auto& c : golden["cases"]) {
    const std::string prompt = c["prompt"];
    EXPECT_EQ(tok->encode(prompt, true, true), c["prompt_ids"].get<std::vector<int32_t>>()) << prompt;
    EXPECT_EQ(tok->encode(prompt, false, true), c["prompt_ids_no_bos"].get<std::vector<int32_t>>()) << prompt;
    // Output text is the concatenation of pieces with special=true.
    std::string text;
    for (int32_t id : c["output_ids"].get<std::vector<int32_t>>()) text += tok->token_to_piece(id, true);
    EXPECT_EQ(text, c["output_text"].get<std::string>()) << prompt;
  }
}

TEST(TokenizerVocab, BertBgeProperties) {
  auto tok = load(kData + "/vocab/ggml-vocab-bert-bge.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_type(), "wpm");
  EXPECT_EQ(tok->vocab_size(), 30522);
  EXPECT_EQ(tok->cls_id(), 101);
  EXPECT_EQ(tok->bos_id(), 101);
  EXPECT_EQ(tok->sep_id(), 102);
  EXPECT_EQ(tok->unk_id(), 100);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_TRUE(tok->is_special(101));
  EXPECT_FALSE(tok->is_special(7592));
  // add_special: [CLS] ... [SEP], as llama_tokenize for WPM.
  EXPECT_EQ(tok->encode("Hello, world!", true, false), (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{101, 102}));
  // parse_special: "[SEP]" in the text is the token, else it is punctuation and a word.
  EXPECT_EQ(tok->encode("hello [SEP]", false, true), (std::vector<int32_t>{7592, 102}));
  EXPECT_EQ(tok->encode("hello [SEP]", false, false).size(), 4u);
  // Pieces: "▁hello" -> " hello", the continuation "hrer" as it is; decode joins them.
  EXPECT_EQ(tok->token_to_piece(7592), " hello");
  EXPECT_EQ(tok->token_to_piece(17875), "hrer");
  EXPECT_EQ(tok->token_to_piece(101, true), "[CLS]");
  EXPECT_EQ(tok->token_to_piece(101, false), "");
  EXPECT_EQ(tok->decode(tok->encode("Führer said: Hello, world!", true, false)), "fuhrer said : hello, world!");  // as Hugging Face: no cleanup before ":"
  EXPECT_EQ(tok->decode({101, 7592, 102}, false), "[CLS] hello [SEP]");
}

}  // namespace
}  // namespace troupe::tokenizer
