// Pre-tokenizer scanners against hand-derived splits of their regexes, and
// consistency with llama.cpp's ids for the vocabularies we have no GGUF for.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "runtime/text/tokenizer/pretokenize.hpp"
#include "runtime/text/tokenizer/unicode.hpp"
#include "vocab_cases.hpp"

namespace troupe::tokenizer {
namespace {

using Chunks = std::vector<std::string>;

TEST(PreTokenize, Gpt2) {
  const auto p = PreTokenizer::gpt2;
  EXPECT_EQ(pre_tokenize(p, "Hello world"), (Chunks{"Hello", " world"}));
  EXPECT_EQ(pre_tokenize(p, "I'm here, they'll"), (Chunks{"I", "'m", " here", ",", " they", "'ll"}));
  EXPECT_EQ(pre_tokenize(p, "I'M"), (Chunks{"I", "'", "M"}));  // contractions are case-sensitive
  EXPECT_EQ(pre_tokenize(p, "  hi"), (Chunks{" ", " hi"}));
  EXPECT_EQ(pre_tokenize(p, "a  "), (Chunks{"a", "  "}));
  EXPECT_EQ(pre_tokenize(p, "x\n\ny"), (Chunks{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pre_tokenize(p, "abc123 456!?"), (Chunks{"abc", "123", " 456", "!?"}));
  EXPECT_EQ(pre_tokenize(p, ""), Chunks{});
}

TEST(PreTokenize, SmolLm) {
  const auto p = PreTokenizer::smollm;
  EXPECT_EQ(pre_tokenize(p, "abc 123"), (Chunks{"abc", " ", "1", "2", "3"}));
  EXPECT_EQ(pre_tokenize(p, "What is 2+2?"), (Chunks{"What", " is", " ", "2", "+", "2", "?"}));
}

TEST(PreTokenize, Llama3) {
  const auto p = PreTokenizer::llama3;
  EXPECT_EQ(pre_tokenize(p, "Hello world"), (Chunks{"Hello", " world"}));
  EXPECT_EQ(pre_tokenize(p, "I'M 12345 ok"), (Chunks{"I", "'M", " ", "123", "45", " ok"}));
  EXPECT_EQ(pre_tokenize(p, "  \n\n  x"), (Chunks{"  \n\n", " ", " x"}));
  EXPECT_EQ(pre_tokenize(p, "hello!!!\n\nworld"), (Chunks{"hello", "!!!\n\n", "world"}));
  EXPECT_EQ(pre_tokenize(p, "\tword (x)"), (Chunks{"\tword", " (", "x", ")"}));
  EXPECT_EQ(pre_tokenize(p, "3.14"), (Chunks{"3", ".", "14"}));
  EXPECT_EQ(pre_tokenize(p, "h\xC3\xA9llo w\xC3\xB6rld"), (Chunks{"h\xC3\xA9llo", " w\xC3\xB6rld"}));
  EXPECT_EQ(pre_tokenize(p, "\xE4\xBD\xA0\xE5\xA5\xBD"), (Chunks{"\xE4\xBD\xA0\xE5\xA5\xBD"}));  // 你好
}

TEST(PreTokenize, Qwen2DigitsAreSingle) {
  EXPECT_EQ(pre_tokenize(PreTokenizer::qwen2, "x 12345"), (Chunks{"x", " ", "1", "2", "3", "4", "5"}));
}

// Qwen3.5: combining marks join letter runs ([\p{L}\p{M}]+) and leave punctuation runs.
TEST(PreTokenize, Qwen35MarksAreLetters) {
  const std::string e_acute = "e\xCC\x81";  // e + U+0301
  EXPECT_EQ(pre_tokenize(PreTokenizer::qwen35, e_acute + "t" + e_acute), (Chunks{e_acute + "t" + e_acute}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::qwen2, e_acute + "t" + e_acute), (Chunks{"e", "\xCC\x81te", "\xCC\x81"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::qwen35, "!\xCC\x81x"), (Chunks{"!\xCC\x81x"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::qwen35, "x 12"), (Chunks{"x", " ", "1", "2"}));
}

// Tekken (Mistral-Nemo): a letter run splits where lower case is followed by
// upper case (by Unicode category, not ASCII); no contractions; one digit a
// chunk; '/' ends punctuation runs with the line breaks after them.
TEST(PreTokenize, TekkenSplitsOnCase) {
  const auto p = PreTokenizer::tekken;
  EXPECT_EQ(pre_tokenize(p, "Hello World"), (Chunks{"Hello", " World"}));
  EXPECT_EQ(pre_tokenize(p, "camelCase HTTPServer"), (Chunks{"camel", "Case", " HTTPServer"}));
  EXPECT_EQ(pre_tokenize(p, "ABC def"), (Chunks{"ABC", " def"}));  // U+ W* when no lower letter follows
  EXPECT_EQ(pre_tokenize(p, "I'm don't"), (Chunks{"I", "'m", " don", "'t"}));
  EXPECT_EQ(pre_tokenize(p, "x 12ab"), (Chunks{"x", " ", "1", "2", "ab"}));
  EXPECT_EQ(pre_tokenize(p, "x/y a/\nb"), (Chunks{"x", "/y", " a", "/\n", "b"}));
  EXPECT_EQ(pre_tokenize(p, "x-\n/y"), (Chunks{"x", "-\n/", "y"}));  // '/' after the line break too
  EXPECT_EQ(pre_tokenize(p, "\tHi\nThere"), (Chunks{"\tHi", "\n", "There"}));
  // É is Lu, é Ll: the case split holds beyond ASCII (llama.cpp's adapted regex keeps "aÉb" whole).
  EXPECT_EQ(pre_tokenize(p, "a\xC3\x89" "b \xC3\x89T\xC3\x89"), (Chunks{"a", "\xC3\x89" "b", " \xC3\x89T\xC3\x89"}));
  // Lo (日本) and marks count as both cases.
  EXPECT_EQ(pre_tokenize(p, "\xE6\x97\xA5\xE6\x9C\xAC" "Text"), (Chunks{"\xE6\x97\xA5\xE6\x9C\xAC" "Text"}));
  const std::string acute = "\xCC\x81";  // U+0301
  EXPECT_EQ(pre_tokenize(p, "e" + acute + "t"), (Chunks{"e" + acute + "t"}));
  EXPECT_EQ(pre_tokenize(p, "!" + acute + "x"), (Chunks{"!" + acute + "x"}));  // the mark after the leading '!'
  EXPECT_EQ(pre_tokenize(p, "A" + acute + "B"), (Chunks{"A" + acute, "B"}));  // U* gives the mark back to W+
  EXPECT_EQ(pre_tokenize(p, "a" + acute + "B"), (Chunks{"a" + acute, "B"}));
  EXPECT_EQ(pre_tokenize(p, " " + acute + " "), (Chunks{" " + acute, " "}));
}

// Hugging Face `tokenizers`' Split with the tekken regex on random strings over every
// character class the regex tells apart (hf_tokenizers_tekken.json "pre_tokenized").
TEST(PreTokenize, TekkenMatchesHuggingFaceSplit) {
  std::ifstream f(std::string(TROUPE_TEST_DATA_DIR) + "/golden/hf_tokenizers_tekken.json");
  ASSERT_TRUE(f);
  const auto golden = nlohmann::json::parse(f);
  ASSERT_GE(golden["pre_tokenized"].size(), 1000u);
  int failures = 0;
  for (const auto& c : golden["pre_tokenized"]) {
    const auto want = c["chunks"].get<Chunks>();
    const auto got = pre_tokenize(PreTokenizer::tekken, c["text"].get<std::string>());
    EXPECT_EQ(got, want) << "text: '" << c["text"].get<std::string>() << "'";
    failures += got != want;
  }
  EXPECT_EQ(failures, 0);
}

// As llama.cpp's unicode_cpts_from_utf8: each invalid byte (a stray
// continuation, a lead byte without its continuations) is one U+FFFD.
TEST(PreTokenize, InvalidUtf8BecomesReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  for (auto p : {PreTokenizer::gpt2, PreTokenizer::smollm, PreTokenizer::llama3, PreTokenizer::qwen2,
                 PreTokenizer::qwen35, PreTokenizer::tekken}) {
    std::string joined;
    for (const auto& c : pre_tokenize(p, "a\xFF\xC3 b\xE2\x82")) joined += c;
    EXPECT_EQ(joined, "a" + fffd + fffd + " b" + fffd + fffd);
  }
  // Valid text comes back as it was; U+FFFD is punctuation-like ("other"), not a letter.
  EXPECT_EQ(pre_tokenize(PreTokenizer::llama3, "x\xC3\xA9\xFF!"), (Chunks{"x\xC3\xA9", fffd + "!"}));
}

TEST(PreTokenize, ByteLevelMapping) {
  EXPECT_EQ(bytes_to_bpe_text(" "), "\xC4\xA0");    // 'Ġ'
  EXPECT_EQ(bytes_to_bpe_text("\n"), "\xC4\x8A");   // 'Ċ'
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(bpe_text_to_bytes(bytes_to_bpe_text(all)), all);
}

// Without the Llama-3 / Qwen2 vocabularies (bpe_vocab_test compares ids when
// TROUPE_VOCAB_DIR has them) we check that chunking is lossless and never yields
// more chunks than llama.cpp's token count (every chunk is at least one token).
void check_consistent(const std::string& name, PreTokenizer pre) {
  const auto cases = testing::load_vocab_cases(std::string(TROUPE_TEST_DATA_DIR) + "/vocab/ggml-vocab-" + name + ".gguf");
  ASSERT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    const auto chunks = pre_tokenize(pre, c.text);
    std::string joined;
    for (const auto& ch : chunks) joined += ch;
    EXPECT_EQ(joined, c.text);
    EXPECT_LE(chunks.size(), c.ids.size()) << "text: '" << c.text << "'";
  }
}

TEST(PreTokenize, Llama3ConsistentWithReferenceIds) { check_consistent("llama-bpe", PreTokenizer::llama3); }
TEST(PreTokenize, Qwen2ConsistentWithReferenceIds) { check_consistent("qwen2", PreTokenizer::qwen2); }

}  // namespace
}  // namespace troupe::tokenizer
