// WordPiece (BERT) tokenization on small handcrafted vocabularies: the
// BertNormalizer and BertPreTokenizer steps, the WordPiece model, the
// tokenizer.json reader and its errors, and the Unicode tables behind them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/tokenizer_json.hpp"
#include "runtime/text/tokenizer/unicode_bert.hpp"
#include "runtime/text/tokenizer/wpm.hpp"

namespace troupe::tokenizer {
namespace {

using json = nlohmann::json;
using Words = std::vector<std::string>;

WordPieceConfig bert() { return WordPieceConfig{}; }  // the defaults are BertNormalizer's

TEST(BertNormalizer, StripsAccentsAndLowercases) {
  EXPECT_EQ(bert_words("Héllo", bert()), Words{"hello"});
  EXPECT_EQ(bert_words("NAÏVE Café Ångström", bert()), (Words{"naive", "cafe", "angstrom"}));
  // Decomposed input (e + U+0301) gives the same.
  EXPECT_EQ(bert_words("He\u0301llo", bert()), Words{"hello"});
  // Hangul syllables decompose into jamo (letters: kept).
  EXPECT_EQ(bert_words("\uD55C", bert()), Words{"\u1112\u1161\u11AB"});
  // İ: NFD is I + U+0307 (dropped), then lowercase.
  EXPECT_EQ(bert_words("İ", bert()), Words{"i"});
  WordPieceConfig keep = bert();
  keep.strip_accents = false;  // lowercase only: full mapping, İ -> i + U+0307
  EXPECT_EQ(bert_words("Héllo İ", keep), (Words{"h\u00e9llo", "i\u0307"}));
  WordPieceConfig cased = bert();
  cased.lowercase = false;
  cased.strip_accents = false;
  EXPECT_EQ(bert_words("Héllo", cased), Words{"H\u00e9llo"});
}

TEST(BertNormalizer, ChineseCharactersAreWordsOfTheirOwn) {
  EXPECT_EQ(bert_words("中文", bert()), (Words{"中", "文"}));
  EXPECT_EQ(bert_words("ab中cd", bert()), (Words{"ab", "中", "cd"}));
  // Kana are not "Chinese characters": they stay together.
  EXPECT_EQ(bert_words("東京は", bert()), (Words{"東", "京", "は"}));
  EXPECT_EQ(bert_words("です", bert()), Words{"\u3066\u3059"});  // で = て + U+3099 (dropped)
  WordPieceConfig off = bert();
  off.handle_chinese_chars = false;
  EXPECT_EQ(bert_words("中文", off), Words{"中文"});
}

TEST(BertNormalizer, CleanTextDropsControlsAndMapsWhitespace) {
  EXPECT_EQ(bert_words(std::string("a\0b", 3), bert()), Words{"ab"});
  EXPECT_EQ(bert_words("a\x01" "b\x7f" "c\u200b" "d\ufeff" "e", bert()), Words{"abcde"});  // Cc and Cf
  EXPECT_EQ(bert_words("a\tb\nc\r\nd\u00a0e\u3000f", bert()), (Words{"a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ(bert_words("a\ufffdb", bert()), Words{"ab"});
  EXPECT_EQ(bert_words("a\xff" "b\xc3", bert()), Words{"ab"});  // invalid UTF-8 -> U+FFFD -> dropped
  EXPECT_EQ(bert_words("a\u0085b", bert()), Words{"ab"});  // NEL is a control first
  EXPECT_EQ(bert_words("   ", bert()), Words{});
  EXPECT_EQ(bert_words("", bert()), Words{});
}

TEST(BertPreTokenizer, PunctuationIsIsolated) {
  EXPECT_EQ(bert_words("Hello, world!", bert()), (Words{"hello", ",", "world", "!"}));
  EXPECT_EQ(bert_words("can't", bert()), (Words{"can", "'", "t"}));
  EXPECT_EQ(bert_words("a$b+c~d", bert()), (Words{"a", "$", "b", "+", "c", "~", "d"}));  // ASCII symbols too
  EXPECT_EQ(bert_words("x—y¿z", bert()), (Words{"x", "—", "y", "¿", "z"}));               // Unicode P*
  EXPECT_EQ(bert_words("x€y", bert()), Words{"x€y"});                                     // non-ASCII S*: not split
  EXPECT_EQ(bert_words("...", bert()), (Words{".", ".", "."}));
  // Punctuation added after Unicode 8.0 is a letter to the reference implementation.
  EXPECT_EQ(bert_words("x\u2e43y", bert()), Words{"x\u2e43y"});
  EXPECT_EQ(bert_words("x\u2e42y", bert()), (Words{"x", "\u2e42", "y"}));
}

TEST(LlamaCppWpm, Preprocess) {
  EXPECT_EQ(llama_cpp_wpm_words("Hello, Wörld! 中文"), (Words{"hello", ",", "world", "!", "中", "文"}));
  EXPECT_EQ(llama_cpp_wpm_words("a€b"), Words{"a€b"});
  EXPECT_EQ(llama_cpp_wpm_words("a\x01" "b \u200d"), Words{"ab"});
}

TEST(UnicodeBert, Tables) {
  EXPECT_EQ(nfd_first(0xE9), 0x65u);    // é -> e
  EXPECT_EQ(nfd_first(0x1EED), 0x75u);  // ử -> u
  EXPECT_EQ(nfd_first(0xAC00), 0x1100u);
  EXPECT_EQ(nfd_first(0x41), 0x41u);
  std::vector<uint32_t> d;
  append_nfd(0x1EED, &d);
  EXPECT_EQ(d, (std::vector<uint32_t>{0x75, 0x31B, 0x309}));
  d.clear();
  append_nfd(0xD7A3, &d);  // the last syllable: L V T
  EXPECT_EQ(d, (std::vector<uint32_t>{0x1112, 0x1175, 0x11C2}));
  EXPECT_EQ(to_lower_simple('A'), static_cast<uint32_t>('a'));
  EXPECT_EQ(to_lower_simple(0x100), 0x101u);  // stride-2 run
  EXPECT_EQ(to_lower_simple(0x101), 0x101u);
  EXPECT_EQ(to_lower_simple(0x3A3), 0x3C3u);  // Σ -> σ
  EXPECT_EQ(to_lower_simple(0x130), 0x69u);
  EXPECT_EQ(to_lower_simple(0x10400), 0x10428u);  // Deseret
  EXPECT_TRUE(is_punctuation('!'));
  EXPECT_TRUE(is_symbol('$'));
  EXPECT_FALSE(is_punctuation('$'));
  EXPECT_TRUE(is_mark_nonspacing(0x301));
  EXPECT_FALSE(is_mark_nonspacing('a'));
  EXPECT_TRUE(category_flags(0x200B) & kControl);
  EXPECT_TRUE(is_cjk_ideograph(0x4E2D));
  EXPECT_FALSE(is_cjk_ideograph(0x3066));
  EXPECT_EQ(utf8_to_codepoints_lossy("a\xe2\x82" "b\xf0\x9f\xa6\x99"), (std::vector<uint32_t>{'a', 0xFFFD, 'b', 0x1F999}));
  EXPECT_EQ(utf8_to_codepoints_lossy("\xc0\xaf\xed\xa0\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));  // overlong, surrogate
}

/// A tokenizer.json for a tiny uncased BERT vocabulary.
json tiny_tokenizer_json(const std::vector<std::string>& words) {
  json vocab = json::object();
  const std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  json added = json::array();
  int id = 0;
  for (const std::string& s : specials) {
    added.push_back({{"id", id}, {"content", s}, {"special", true}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}});
    vocab[s] = id++;
  }
  for (const std::string& w : words) vocab[w] = id++;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true}, {"strip_accents", nullptr},
        {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}})},
        {"special_tokens",
         {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
          {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model",
       {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100}, {"vocab", vocab}}},
  };
}

const std::vector<std::string> kWords = {"un", "##aff", "##able", "hello", ",", "world", "!", "a", "##b", "中", "'", "t",
                                         "can", "##n", "x", "##x"};

std::unique_ptr<Tokenizer> tiny(const json& doc = tiny_tokenizer_json(kWords)) {
  auto v = vocab_from_tokenizer_json(doc, "tiny.json");
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  if (!v.ok()) return nullptr;
  auto t = Tokenizer::from_vocab(std::move(*v));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(*t) : nullptr;
}

int32_t id_of(const Tokenizer& t, const std::string& s) { return t.token_id(s).value_or(-1); }

TEST(WordPiece, GreedyLongestMatch) {
  auto t = tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->model_type(), "wpm");
  EXPECT_EQ(t->encode("unaffable", false, false),
            (std::vector<int32_t>{id_of(*t, "un"), id_of(*t, "##aff"), id_of(*t, "##able")}));
  EXPECT_EQ(t->encode("abbb", false, false),
            (std::vector<int32_t>{id_of(*t, "a"), id_of(*t, "##b"), id_of(*t, "##b"), id_of(*t, "##b")}));
  // A position where nothing matches makes the whole word [UNK] (one token).
  EXPECT_EQ(t->encode("unaffablez hello", false, false), (std::vector<int32_t>{1, id_of(*t, "hello")}));
  EXPECT_EQ(t->encode("zzz", false, false), (std::vector<int32_t>{1}));
}

TEST(WordPiece, LongWordsAreUnknown) {
  auto t = tiny();
  ASSERT_NE(t, nullptr);
  const std::string x100(100, 'x'), x101(101, 'x');
  EXPECT_EQ(t->encode(x100, false, false).size(), 100u);  // x ##x ##x ...
  EXPECT_EQ(t->encode(x101, false, false), (std::vector<int32_t>{1}));
  std::string e101;
  for (int i = 0; i < 101; ++i) e101 += "é";  // counted in characters, after normalization
  EXPECT_EQ(t->encode(e101, false, false), (std::vector<int32_t>{1}));
}

TEST(WordPiece, SpecialTokensAndTemplate) {
  auto t = tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->cls_id(), 2);
  EXPECT_EQ(t->sep_id(), 3);
  EXPECT_EQ(t->unk_id(), 1);
  EXPECT_EQ(t->pad_id(), 0);
  const int32_t hello = id_of(*t, "hello"), comma = id_of(*t, ","), world = id_of(*t, "world"), bang = id_of(*t, "!");
  EXPECT_EQ(t->encode("Hello, world!", true, false), (std::vector<int32_t>{2, hello, comma, world, bang, 3}));
  EXPECT_EQ(t->encode("Hello, world!", false, false), (std::vector<int32_t>{hello, comma, world, bang}));
  // parse_special (what Hugging Face always does): [SEP] in the text is the token.
  EXPECT_EQ(t->encode("hello [SEP] world", false, true), (std::vector<int32_t>{hello, 3, world}));
  EXPECT_TRUE(t->is_special(2));
  EXPECT_FALSE(t->is_special(hello));
}

TEST(WordPiece, DecodeJoinsPiecesAsHuggingFace) {
  auto t = tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->token_to_piece(id_of(*t, "hello")), " hello");
  EXPECT_EQ(t->token_to_piece(id_of(*t, "##aff")), "aff");
  EXPECT_EQ(t->decode(t->encode("Hello, unaffable world!", true, false)), "hello, unaffable world!");
  EXPECT_EQ(t->decode(t->encode("can't", true, false)), "can ' t");  // per-piece cleanup, as tokenizers
  EXPECT_EQ(t->decode(t->encode("hello", true, false), false), "[CLS] hello [SEP]");
}

TEST(TokenizerJson, NoNormalizerAndBertProcessing) {
  json doc = tiny_tokenizer_json(kWords);
  doc["normalizer"] = nullptr;
  doc["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}};
  auto t = tiny(doc);
  ASSERT_NE(t, nullptr);
  // Without a normalizer "Hello" is not lowercased, so it is unknown.
  EXPECT_EQ(t->encode("Hello hello", true, false), (std::vector<int32_t>{2, 1, id_of(*t, "hello"), 3}));
  doc["post_processor"] = nullptr;
  auto plain = tiny(doc);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->encode("hello", true, false), (std::vector<int32_t>{id_of(*plain, "hello")}));
}

void expect_json_error(const json& doc, StatusCode code, const std::string& fragment) {
  auto v = vocab_from_tokenizer_json(doc, "bad.json");
  ASSERT_FALSE(v.ok()) << fragment;
  EXPECT_EQ(v.status().code(), code) << v.status().to_string();
  EXPECT_EQ(v.status().message().rfind("bad.json: ", 0), 0u) << v.status().message();
  EXPECT_NE(v.status().message().find(fragment), std::string::npos) << v.status().message();
}

TEST(TokenizerJson, Errors) {
  const json good = tiny_tokenizer_json(kWords);
  expect_json_error(json::array(), StatusCode::data_loss, "top level is a JSON array");
  json d = good;
  d.erase("model");
  expect_json_error(d, StatusCode::data_loss, "model is missing");
  d = good;
  d["model"]["type"] = "Unigram";
  expect_json_error(d, StatusCode::not_supported, "model.type 'Unigram' is not supported");
  d = good;
  d["model"].erase("vocab");
  expect_json_error(d, StatusCode::data_loss, "model.vocab is missing");
  d = good;
  d["model"]["vocab"]["hello"] = "x";
  expect_json_error(d, StatusCode::data_loss, "model.vocab['hello']");
  d = good;
  d["model"]["vocab"].erase("un");  // id 5 becomes a hole
  expect_json_error(d, StatusCode::data_loss, "no token has id 5");
  d = good;
  d["model"]["vocab"]["dup"] = 5;
  expect_json_error(d, StatusCode::data_loss, "id 5 is both");
  d = good;
  d["model"]["unk_token"] = "<unk>";
  expect_json_error(d, StatusCode::data_loss, "unk_token '<unk>' is not in the vocabulary");
  d = good;
  d["model"]["max_input_chars_per_word"] = -1;
  expect_json_error(d, StatusCode::data_loss, "max_input_chars_per_word");
  d = good;
  d["normalizer"] = {{"type", "NFKC"}};
  expect_json_error(d, StatusCode::not_supported, "normalizer type 'NFKC'");
  d = good;
  d["normalizer"]["lowercase"] = "yes";
  expect_json_error(d, StatusCode::data_loss, "normalizer.lowercase is a JSON string");
  d = good;
  d["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_json_error(d, StatusCode::not_supported, "pre_tokenizer type 'Whitespace'");
  d = good;
  d["pre_tokenizer"] = nullptr;
  expect_json_error(d, StatusCode::data_loss, "pre_tokenizer is missing");
  d = good;
  d["post_processor"]["type"] = "RobertaProcessing";
  expect_json_error(d, StatusCode::not_supported, "post_processor type 'RobertaProcessing'");
  d = good;
  d["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {2, 3};
  expect_json_error(d, StatusCode::not_supported, "maps to 2 ids");
  d = good;
  d["post_processor"]["special_tokens"]["[SEP]"]["ids"] = {9999};
  expect_json_error(d, StatusCode::data_loss, "has id 9999");
  d = good;
  d["added_tokens"][0] = 7;
  expect_json_error(d, StatusCode::data_loss, "added_tokens[0] is not an object");
  d = good;
  d["decoder"] = {{"type", "ByteLevel"}};
  expect_json_error(d, StatusCode::not_supported, "decoder type 'ByteLevel'");
}

TEST(TokenizerJson, FileErrorsNameThePath) {
  auto missing = Tokenizer::from_tokenizer_json("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
  const std::string path = ::testing::TempDir() + "wordpiece_test_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << "{\"model\": ";
  auto bad = Tokenizer::from_tokenizer_json(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::data_loss);
  EXPECT_EQ(bad.status().message().rfind(path + ": not valid JSON at byte 10", 0), 0u) << bad.status().message();
  std::ofstream(path) << tiny_tokenizer_json(kWords).dump();
  auto ok = Tokenizer::from_tokenizer_json(path);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)->vocab_size(), 5 + static_cast<int32_t>(kWords.size()));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace troupe::tokenizer
