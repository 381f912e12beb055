// The grammar engine's core: regex terms and derivatives, the regex syntax,
// the Earley parser (left recursion, ambiguity, empty rules), token masks
// against a small vocabulary, rollback, and the bounds on bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "runtime/rank/structured/codepoint_set.hpp"
#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/grammar_matcher.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "runtime/rank/structured/regex_expr.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"
#include "runtime/rank/structured/token_vocabulary.hpp"

namespace troupe::structured {
namespace {

ExprId full_regex(ExprStore& s, std::string_view pattern) {
  auto node = parse_regex(pattern, RegexDialect::python);
  EXPECT_TRUE(node.ok()) << node.status().to_string();
  auto e = lower_full_match(s, *node, utf8_encoder(s));
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? *e : ExprStore::kNothing;
}

std::string parse_error(std::string_view pattern) {
  auto node = parse_regex(pattern, RegexDialect::ecmascript);
  if (node.ok()) {
    ExprStore s;
    auto e = lower_full_match(s, *node, utf8_encoder(s));
    return e.ok() ? "" : e.status().message();
  }
  return node.status().message();
}

TEST(RegexExpr, DerivativesMatch) {
  ExprStore s;
  ExprId e = full_regex(s, "a[bc]*d|x{2,3}");
  EXPECT_TRUE(s.matches(e, "ad"));
  EXPECT_TRUE(s.matches(e, "abcbd"));
  EXPECT_TRUE(s.matches(e, "xx"));
  EXPECT_TRUE(s.matches(e, "xxx"));
  EXPECT_FALSE(s.matches(e, "xxxx"));
  EXPECT_FALSE(s.matches(e, "a"));
  EXPECT_FALSE(s.matches(e, "abd "));
}

TEST(RegexExpr, HashConsingGivesOneTermPerExpression) {
  ExprStore s;
  ExprId a = s.alt(s.literal("ab"), s.literal("cd"));
  ExprId b = s.alt(s.literal("cd"), s.literal("ab"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(s.concat(s.concat(s.byte('a'), s.byte('b')), s.byte('c')), s.literal("abc"));
}

TEST(RegexExpr, IntersectionAndComplement) {
  ExprStore s;
  ExprId word = full_regex(s, "[a-z]+");
  ExprId not_kw = s.negate(s.alt(s.literal("if"), s.literal("else")));
  ExprId ident = s.both(word, not_kw);
  EXPECT_TRUE(s.matches(ident, "i"));
  EXPECT_TRUE(s.matches(ident, "iff"));
  EXPECT_FALSE(s.matches(ident, "if"));
  EXPECT_FALSE(s.matches(ident, "else"));
  EXPECT_FALSE(s.is_live(s.both(full_regex(s, "[a-z]{3}"), full_regex(s, "[a-z]{1,2}"))));
  EXPECT_TRUE(s.is_live(ident));
}

TEST(RegexExpr, HugeCountsAndPathologicalPatternsStayBounded) {
  ExprStore s;
  auto t0 = std::chrono::steady_clock::now();
  ExprId big = full_regex(s, "a{1,100000}");
  EXPECT_LT(s.size(), 100u);  // counts are kept, not unrolled
  EXPECT_TRUE(s.matches(big, std::string(5000, 'a')));
  ExprId patho = full_regex(s, "(a|aa)*b");
  EXPECT_TRUE(s.matches(patho, std::string(3000, 'a') + "b"));
  EXPECT_FALSE(s.matches(patho, std::string(3000, 'a')));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST(RegexExpr, LiteralSetIsFactored) {
  ExprStore s;
  std::vector<std::string> words;
  for (int i = 0; i < 100000; ++i) words.push_back(fmt::format("w{}", i));
  std::vector<std::string_view> views(words.begin(), words.end());
  ExprId e = s.literal_set(views);
  EXPECT_TRUE(s.matches(e, "w99999"));
  EXPECT_TRUE(s.matches(e, "w0"));
  EXPECT_FALSE(s.matches(e, "w100000"));
}

TEST(RegexSyntax, ClassesEscapesAndUnicode) {
  ExprStore s;
  ExprId e = full_regex(s, R"(\d{3}-[^\s]+\.\w\u00e9[\x41-\x43])");
  EXPECT_TRUE(s.matches(e, "123-ab.c\xC3\xA9" "B"));
  EXPECT_FALSE(s.matches(e, "123-a b.c\xC3\xA9" "B"));
  ExprId dot = full_regex(s, "..");
  EXPECT_TRUE(s.matches(dot, "\xE2\x82\xAC" "a"));  // a code point is one '.'
  EXPECT_FALSE(s.matches(dot, "\xE2\x82"));         // never half a character
  ExprId lazy = full_regex(s, "a+?b*?");
  EXPECT_TRUE(s.matches(lazy, "aab"));
  ExprId brace = full_regex(s, "a{,2}b{x}");  // Python's {,n} is 0..n; {x} is literal
  EXPECT_TRUE(s.matches(brace, "ab{x}"));
  EXPECT_TRUE(s.matches(brace, "b{x}"));
}

TEST(RegexSyntax, RefusesWhatItCannotMatchByName) {
  EXPECT_NE(parse_error(R"(\bword)").find("word boundaries"), std::string::npos);
  EXPECT_NE(parse_error(R"((a)\1)").find("backreferences"), std::string::npos);
  EXPECT_NE(parse_error(R"(a(?=b))").find("lookahead"), std::string::npos);
  EXPECT_NE(parse_error(R"((?<=a)b)").find("lookbehind"), std::string::npos);
  EXPECT_NE(parse_error(R"(\p{L})").find("property"), std::string::npos);
  EXPECT_NE(parse_error("a{1,2000000}").find("limit"), std::string::npos);
  EXPECT_NE(parse_error("(a").find("missing ')'"), std::string::npos);
  EXPECT_NE(parse_error("a^b").find("'^'"), std::string::npos);
}

TEST(RegexSyntax, SearchSemanticsAndAnchors) {
  ExprStore s;
  auto search = [&](std::string_view p) {
    auto node = parse_regex(p, RegexDialect::ecmascript);
    EXPECT_TRUE(node.ok());
    auto e = lower_search(s, *node, utf8_encoder(s), CodepointSet::all());
    EXPECT_TRUE(e.ok());
    return *e;
  };
  ExprId unanchored = search("ab");
  EXPECT_TRUE(s.matches(unanchored, "xxabyy"));
  EXPECT_FALSE(s.matches(unanchored, "xxa"));
  ExprId anchored = search("^ab$");
  EXPECT_TRUE(s.matches(anchored, "ab"));
  EXPECT_FALSE(s.matches(anchored, "xab"));
  ExprId mixed = search("^a|b$");
  EXPECT_TRUE(s.matches(mixed, "axx"));
  EXPECT_TRUE(s.matches(mixed, "xxb"));
  EXPECT_FALSE(s.matches(mixed, "xax"));
  ExprId group = search("^(foo|bar)$");
  EXPECT_TRUE(s.matches(group, "bar"));
  EXPECT_FALSE(s.matches(group, "bars"));
}

TEST(CodepointSet, Utf8RangesCoverExactlyTheSet) {
  ExprStore s;
  CodepointSet set = CodepointSet::range(0x7A, 0x800);
  set.add(0xFFF0, 0x10010);
  ExprId e = utf8_expr(s, set);
  for (uint32_t cp : {0x7Au, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFF0u, 0xFFFFu, 0x10000u, 0x10010u}) {
    std::string u;
    append_utf8(u, cp);
    EXPECT_TRUE(s.matches(e, u)) << cp;
  }
  for (uint32_t cp : {0x79u, 0x801u, 0xFFEFu, 0x10011u}) {
    std::string u;
    append_utf8(u, cp);
    EXPECT_FALSE(s.matches(e, u)) << cp;
  }
}

// A vocabulary of the given texts; the last id is the end-of-generation token.
std::shared_ptr<const TokenVocabulary> small_vocab(std::vector<std::string> texts) {
  texts.push_back("");
  auto eog = static_cast<int32_t>(texts.size() - 1);
  auto n = static_cast<int64_t>(texts.size());
  return TokenVocabulary::create(std::move(texts), {eog}, n);
}

std::vector<std::string> allowed(GrammarMatcher& m, const TokenVocabulary& v, const std::vector<std::string>& texts) {
  std::vector<uint64_t> bits(v.mask_words());
  EXPECT_TRUE(m.fill_mask(bits.data()).ok());
  std::vector<std::string> out;
  for (size_t id = 0; id < static_cast<size_t>(v.vocab_size()); ++id) {
    if ((bits[id / 64] >> (id % 64)) & 1) out.push_back(id < texts.size() ? texts[id] : "<eos>");
  }
  return out;
}

// expr: expr "+" num | num   (left recursive)
std::shared_ptr<const Grammar> sum_grammar() {
  GrammarBuilder b;
  ExprStore& s = b.exprs();
  Symbol expr = b.rule("expr");
  Symbol num = b.token(s.plus(s.bytes(ByteSet::range('0', '9'))), "num");
  Symbol plus = b.token(s.literal("+"), "+");
  b.add(expr, {expr, plus, num});
  b.add(expr, {num});
  auto g = b.build(expr);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return *g;
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  auto v = small_vocab({"x"});
  GrammarMatcher m(g, v);
  return m.accept_bytes(text) && m.can_end();
}

TEST(Earley, LeftRecursion) {
  auto g = sum_grammar();
  EXPECT_TRUE(accepts(g, "1"));
  EXPECT_TRUE(accepts(g, "12+3+456"));
  EXPECT_FALSE(accepts(g, "12+"));
  EXPECT_FALSE(accepts(g, "1++2"));
  EXPECT_FALSE(accepts(g, "+1"));
}

TEST(Earley, AmbiguityAndEmptyRules) {
  GrammarBuilder b;
  ExprStore& s = b.exprs();
  // s: s s | "a" | <empty>  -- highly ambiguous, nullable, left and right recursive
  Symbol start = b.rule("s");
  Symbol a = b.token(s.literal("a"), "a");
  b.add(start, {start, start});
  b.add(start, {a});
  b.add(start, {});
  // t: s "b" s
  Symbol t = b.rule("t");
  b.add(t, {start, b.token(s.literal("b"), "b"), start});
  auto g = b.build(t);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(accepts(*g, "b"));
  EXPECT_TRUE(accepts(*g, "aaab"));
  EXPECT_TRUE(accepts(*g, "baaaaa"));
  EXPECT_FALSE(accepts(*g, "aa"));
  EXPECT_FALSE(accepts(*g, "bb"));
}

TEST(Earley, UnproductiveRulesAreDropped) {
  GrammarBuilder b;
  ExprStore& s = b.exprs();
  // loop: "x" loop  (never ends) ; start: loop | "y"
  Symbol loop = b.rule("loop");
  b.add(loop, {b.token(s.literal("x"), "x"), loop});
  Symbol start = b.rule("start");
  b.add(start, {loop});
  b.add(start, {b.token(s.literal("y"), "y")});
  auto g = b.build(start);
  ASSERT_TRUE(g.ok());
  auto v = small_vocab({"x", "y"});
  GrammarMatcher m(*g, v);
  EXPECT_EQ(allowed(m, *v, {"x", "y"}), (std::vector<std::string>{"y"}));
}

TEST(Earley, GreedyLexemes) {
  // two numbers need a separator: the lexer takes the longest number
  GrammarBuilder b;
  ExprStore& s = b.exprs();
  Symbol num = b.token(s.plus(s.bytes(ByteSet::range('0', '9'))), "num");
  Symbol pair = b.rule("pair");
  b.add(pair, {num, b.token(s.literal(","), ","), num});
  auto g = b.build(pair);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(accepts(*g, "12,345"));
  EXPECT_FALSE(accepts(*g, "12,"));
}

TEST(TokenMask, SmallVocabulary) {
  auto g = sum_grammar();
  std::vector<std::string> texts = {"1", "+", "2", "+1", "1+", "12", "a", "++", "1+2+"};
  auto v = small_vocab(texts);
  GrammarMatcher m(g, v);
  EXPECT_EQ(allowed(m, *v, texts), (std::vector<std::string>{"1", "2", "1+", "12", "1+2+"}));
  ASSERT_TRUE(m.accept_token(0));  // "1"
  EXPECT_EQ(allowed(m, *v, texts), (std::vector<std::string>{"1", "+", "2", "+1", "1+", "12", "1+2+", "<eos>"}));
  ASSERT_TRUE(m.accept_token(4));  // "1+"
  EXPECT_EQ(allowed(m, *v, texts), (std::vector<std::string>{"1", "2", "1+", "12", "1+2+"}));
  EXPECT_FALSE(m.accept_token(1));  // "+" after "+"
  EXPECT_FALSE(m.accept_token(9));  // end-of-generation: not a whole sum
  ASSERT_TRUE(m.accept_token(2));   // "2"
  EXPECT_TRUE(m.accept_token(9));
  EXPECT_TRUE(m.is_terminated());
}

TEST(TokenMask, RollbackRestoresEveryState) {
  auto g = sum_grammar();
  std::vector<std::string> texts = {"1", "+", "2", "+1", "1+", "12", "a", "++", "1+2+"};
  auto v = small_vocab(texts);
  GrammarMatcher m(g, v);
  ASSERT_TRUE(m.accept_token(0));
  auto after_one = allowed(m, *v, texts);
  ASSERT_TRUE(m.accept_token(8));  // "1+2+"
  ASSERT_TRUE(m.accept_token(5));  // "12"
  ASSERT_TRUE(m.accept_token(9));  // end
  m.rollback(3);
  EXPECT_EQ(m.steps(), 1u);
  EXPECT_FALSE(m.is_terminated());
  EXPECT_EQ(allowed(m, *v, texts), after_one);
  ASSERT_TRUE(m.accept_token(3));  // "+1"
  EXPECT_TRUE(m.can_end());
  m.rollback(5);  // more than there are: back to the start
  EXPECT_EQ(m.steps(), 0u);
  EXPECT_FALSE(m.can_end());
}

TEST(TokenMask, SlicesGiveTheSameMaskAsAWalk) {
  // A string lexeme: the json_text slice is allowed whole inside it.
  GrammarBuilder b;
  ExprStore& s = b.exprs();
  CodepointSet body = CodepointSet::range(0x20, CodepointSet::kMax).minus(CodepointSet::of('"'));
  ExprId str = s.concat(s.concat(s.byte('"'), s.star(utf8_expr(s, body))), s.byte('"'));
  Symbol start = b.rule("start");
  b.add(start, {b.token(str, "string")});
  auto g = b.build(start);
  ASSERT_TRUE(g.ok());
  std::vector<std::string> texts = {"\"", "ab", "c d", "\xC3\xA9", "\xC3", "\"x", "x\"", "\\", "\n"};
  auto v = small_vocab(texts);
  GrammarMatcher m(*g, v);
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_EQ(allowed(m, *v, texts),
            (std::vector<std::string>{"\"", "ab", "c d", "\xC3\xA9", "\xC3", "x\"", "\\"}));
  ASSERT_TRUE(m.accept_token(4));  // half a character: only its continuation may follow
  EXPECT_TRUE(allowed(m, *v, texts).empty() || allowed(m, *v, texts) == std::vector<std::string>{"<eos>"});
}

// Every mask bit must agree with accepting that token on a copy of the matcher, along
// random walks through a JSON grammar, and rollback must give back the earlier masks.
TEST(TokenMask, AgreesWithAcceptingEachTokenAndRollback) {
  auto g = compile_json_schema_grammar(R"({"type":"object","properties":{
      "s":{"type":"string","maxLength":6},"n":{"type":"number","minimum":-2,"maximum":30},
      "l":{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"null"},{"$ref":"#"}]}},
      "e":{"enum":["ab","a\"b",true]}},"additionalProperties":{"type":"boolean"}})");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<std::string> texts = {"{", "}", "[", "]", ",", ":", " ", "\"", "a", "b", "1", "2", "-", ".", "e", "3",
                                    "true", "null", "{\"", "\":", "\": ", "\", \"", "\"}", ", \"", "12", "\\",
                                    "\\\"", "\xC3\xA9", "\xC3", "\xA9", "ab", "\"ab\"", "\n", "0", "\"]", "],",
                                    "}]", "\"s\": \"", "x", "\"x", "\"l\": [", "\"n\": ", "\"e\": "};
  auto v = small_vocab(texts);
  const auto eog = static_cast<int32_t>(texts.size());
  std::mt19937 rng(1);
  for (int walk = 0; walk < 30; ++walk) {
    GrammarMatcher m(*g, v);
    std::vector<std::vector<uint64_t>> masks;
    for (int step = 0; step < 40 && !m.is_terminated(); ++step) {
      std::vector<uint64_t> bits(v->mask_words());
      ASSERT_TRUE(m.fill_mask(bits.data()).ok());
      masks.push_back(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < eog; ++id) {
        bool bit = (bits[static_cast<size_t>(id) / 64] >> (id % 64)) & 1;
        GrammarMatcher copy = m;
        ASSERT_EQ(bit, copy.accept_token(id)) << "walk " << walk << " step " << step << " token " << id;
        if (bit) allowed.push_back(id);
      }
      // The end: when the grammar accepts, or when nothing else could come.
      bool eog_bit = (bits[static_cast<size_t>(eog) / 64] >> (eog % 64)) & 1;
      ASSERT_EQ(eog_bit, m.can_end() || allowed.empty()) << "walk " << walk << " step " << step;
      if (allowed.empty()) break;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
    // Back to a random earlier point: the same mask as then.
    if (masks.size() > 2) {
      size_t back = 1 + rng() % (masks.size() - 1);
      size_t keep = m.steps() - back;
      m.rollback(back);
      std::vector<uint64_t> bits(v->mask_words());
      ASSERT_TRUE(m.fill_mask(bits.data()).ok());
      EXPECT_EQ(bits, masks[keep]) << "walk " << walk;
    }
  }
}

// Matchers of one grammar on several threads share its lazily built lexer: each thread's
// masks equal those of the same walk on one thread.
TEST(TokenMask, ThreadsShareOneGrammar) {
  const char* schema = R"({"type":"array","items":{"type":"object","properties":{"k":{"type":"string"},
                          "v":{"type":"integer","minimum":-50,"maximum":5000}}}})";
  std::vector<std::string> texts = {"[", "]", "{\"", "\":", " ", "\", \"", "\"}", "k", "v", "1", "2", "-", "0",
                                    ",", "}", "{", "\"", "a", "ab", "},", "\"k\": \"", "\"v\": ", "99", "\xC3\xA9"};
  auto v = small_vocab(texts);
  // The walks: random tokens from the mask, on a grammar of their own.
  auto walk = [&](const std::shared_ptr<const Grammar>& g, unsigned seed) {
    std::mt19937 rng(seed);
    GrammarMatcher m(g, v);
    std::vector<std::vector<uint64_t>> masks;
    for (int step = 0; step < 60; ++step) {
      std::vector<uint64_t> bits(v->mask_words());
      if (!m.fill_mask(bits.data()).ok()) break;
      masks.push_back(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(texts.size()); ++id) {
        if ((bits[static_cast<size_t>(id) / 64] >> (id % 64)) & 1) allowed.push_back(id);
      }
      if (allowed.empty() || !m.accept_token(allowed[rng() % allowed.size()])) break;
    }
    return masks;
  };
  std::vector<std::vector<std::vector<uint64_t>>> expected;
  for (unsigned seed = 0; seed < 8; ++seed) expected.push_back(walk(*compile_json_schema_grammar(schema), seed));
  auto shared = *compile_json_schema_grammar(schema);
  std::vector<std::vector<std::vector<uint64_t>>> got(8);
  std::vector<std::thread> threads;
  for (unsigned seed = 0; seed < 8; ++seed) threads.emplace_back([&, seed] { got[seed] = walk(shared, seed); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, expected);
}

TEST(GrammarLimits, MaskAndRowLimitsAreErrors) {
  GrammarLimits limits;
  limits.max_row_items = 50;
  GrammarBuilder b(limits);
  ExprStore& s = b.exprs();
  // s: s s | "a" -- every boundary's row grows with the input.
  Symbol start = b.rule("s");
  b.add(start, {start, start});
  b.add(start, {b.token(s.literal("a"), "a")});
  auto g = b.build(start);
  ASSERT_TRUE(g.ok());
  auto v = small_vocab({"a"});
  GrammarMatcher m(*g, v);
  for (int i = 0; i < 100 && m.accept_token(0); ++i) {
  }
  std::vector<uint64_t> bits(v->mask_words());
  Status st = m.fill_mask(bits.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Earley items"), std::string::npos) << st.to_string();
}

TEST(GrammarLimits, LexerWorkPerMaskIsBounded) {
  GrammarLimits limits;
  limits.max_mask_derivatives = 5;
  auto g = compile_json_schema_grammar(R"({"type":"string","pattern":"^(ab|cd)*[0-9]{3}$"})", {}, limits);
  ASSERT_TRUE(g.ok());
  auto v = small_vocab({"\"", "ab", "cd", "1", "\"ab"});
  GrammarMatcher m(*g, v);
  std::vector<uint64_t> bits(v->mask_words());
  Status st;
  for (int32_t token : {0, 1, 2, 1}) {  // new lexer states at every step
    st = m.fill_mask(bits.data());
    if (!st.ok() || !m.accept_token(token)) break;
  }
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("derivatives"), std::string::npos) << st.to_string();
}

TEST(GrammarLimits, CompileTimeLimitIsNamed) {
  GrammarLimits limits;
  limits.compile_seconds = 0.0;
  GrammarBuilder b(limits);
  Symbol start = b.rule("start");
  b.add(start, {b.token(b.exprs().literal("a"), "a")});
  auto g = b.build(start);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("time limit"), std::string::npos);
}

}  // namespace
}  // namespace troupe::structured
