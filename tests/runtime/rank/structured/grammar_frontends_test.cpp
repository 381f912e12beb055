// The front ends besides JSON Schema: regex, choice, Lark and GBNF grammars
// (with errors at a line and column), structural tags, and the grammar cache.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/rank/structured/grammar_cache.hpp"
#include "runtime/rank/structured/grammar_frontends.hpp"
#include "tests/runtime/rank/structured/grammar_test_util.hpp"

namespace troupe::structured {
namespace {

using testing::accepts;
using testing::error_of;
using testing::ok_or_null;
using testing::prefix_ok;

TEST(RegexGrammar, FullMatch) {
  auto g = ok_or_null(compile_regex_grammar(R"(\w+@\w+\.com\n?)"));
  EXPECT_TRUE(accepts(g, "alan@enigma.com"));
  EXPECT_TRUE(accepts(g, "alan@enigma.com\n"));
  EXPECT_FALSE(accepts(g, "alan@enigma.org"));
  EXPECT_FALSE(accepts(g, "x alan@enigma.com"));
  auto anchored = ok_or_null(compile_regex_grammar("^(yes|no)$"));
  EXPECT_TRUE(accepts(anchored, "no"));
  EXPECT_NE(error_of(compile_regex_grammar(R"((a)\1)")).find("backreferences"), std::string::npos);
}

TEST(ChoiceGrammar, ExactlyOneString) {
  auto g = ok_or_null(compile_choice_grammar({"Positive", "Negative", "Neg"}));
  EXPECT_TRUE(accepts(g, "Positive"));
  EXPECT_TRUE(accepts(g, "Neg"));
  EXPECT_TRUE(prefix_ok(g, "Nega"));
  EXPECT_FALSE(accepts(g, "Nega"));
  EXPECT_FALSE(accepts(g, "positive"));
  EXPECT_FALSE(compile_choice_grammar({}).ok());
}

const char* kGbnfJson = R"(
# JSON, as llama.cpp writes it
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(GbnfGrammar, JsonGrammar) {
  auto g = ok_or_null(compile_grammar_text(kGbnfJson));
  EXPECT_TRUE(accepts(g, R"({"a": [1, 2.5, {"b": null}], "c": "x\"y"})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, R"({"a": [1, 2,]})"));
  EXPECT_FALSE(accepts(g, "[1]"));  // root is an object
}

TEST(GbnfGrammar, LeftRecursionRepetitionsAndClasses) {
  auto g = ok_or_null(compile_grammar_text(R"G(
root ::= expr
expr ::= expr "+" term | term
term ::= [0-9]{1,3} | "(" expr ")"
)G"));
  EXPECT_TRUE(accepts(g, "1+22+(333+4)"));
  EXPECT_FALSE(accepts(g, "1+2222"));
  EXPECT_FALSE(accepts(g, "1+"));
  auto any = ok_or_null(compile_grammar_text(R"(root ::= "<" [^>]* ">" . "\u00e9")"));
  EXPECT_TRUE(accepts(any, "<a b>x\xC3\xA9"));
}

TEST(GbnfGrammar, ErrorsHaveLineAndColumn) {
  std::string e = error_of(compile_grammar_text("root ::= \"a\"\nfoo ::= ( \"b\" ]\n"));
  EXPECT_NE(e.find("line 2, column 15"), std::string::npos) << e;
  e = error_of(compile_grammar_text("root ::= a\n"));
  EXPECT_NE(e.find("line 1, column 10"), std::string::npos) << e;
  EXPECT_NE(e.find("undefined rule \"a\""), std::string::npos) << e;
  e = error_of(compile_grammar_text("start ::= \"a\""));
  EXPECT_NE(e.find("root"), std::string::npos) << e;
}

TEST(GbnfGrammar, DeepChainsAndRepeatsAreErrorsNotCrashes) {
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i) chain += fmt::format("r{} ::= \"x\" r{} | \"y\"\n", i, i + 1);
  chain += "r5000 ::= \"z\"\n";
  auto deep = compile_grammar_text(chain);
  if (!deep.ok()) {
    EXPECT_NE(deep.status().message().find("nested"), std::string::npos) << deep.status().to_string();
  }
  EXPECT_FALSE(compile_grammar_text("root ::= \"a\"*************").ok());
  EXPECT_FALSE(compile_regex_grammar("a**").ok());
}

TEST(LarkGrammar, RulesTerminalsIgnoreAndCommon) {
  auto g = ok_or_null(compile_grammar_text(R"G(
// arithmetic
?start: sum
?sum: product
    | sum ("+"|"-") product
?product: atom
    | product "*" atom
?atom: NUMBER | NAME | "(" sum ")" | call
call: NAME "(" [sum ("," sum)*] ")"
NAME: /[a-z_][a-z0-9_]*/i
%import common.NUMBER
%import common.WS
%ignore WS
)G"));
  EXPECT_TRUE(accepts(g, "1 + 2*x"));
  EXPECT_TRUE(accepts(g, " f( 1 , Y ) * (3.5 - 2) \n"));
  EXPECT_TRUE(accepts(g, "g()"));
  EXPECT_FALSE(accepts(g, "1 +"));
  EXPECT_FALSE(accepts(g, "f(1,)"));
}

TEST(LarkGrammar, RangesRepeatsLiteralsAndJson) {
  auto g = ok_or_null(compile_grammar_text(R"(
start: KEY "=" value
KEY: ("a".."z")~2..4
value: "yes"i | DIGITS | %json {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
DIGITS: DIGIT+
DIGIT: "0".."9"
)"));
  EXPECT_TRUE(accepts(g, "ab=YeS"));
  EXPECT_TRUE(accepts(g, "abcd=123"));
  EXPECT_TRUE(accepts(g, R"(abc={"n": 5})"));
  EXPECT_FALSE(accepts(g, "a=1"));
  EXPECT_FALSE(accepts(g, "abcde=1"));
  EXPECT_FALSE(accepts(g, R"(ab={"n": "5"})"));
}

TEST(LarkGrammar, ErrorsHaveLineAndColumn) {
  std::string e = error_of(compile_grammar_text("start: a\na: \"x\" | \n  b\n"));
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  e = error_of(compile_grammar_text("start: \"x\" X\nX: X \"y\"\n"));
  EXPECT_NE(e.find("line 2, column 4"), std::string::npos) << e;
  e = error_of(compile_grammar_text("start: /ab(/\n"));
  EXPECT_NE(e.find("line 1, column 8"), std::string::npos) << e;
  e = error_of(compile_grammar_text("start: A\nA: B\nB: A\n"));
  EXPECT_NE(e.find("refers to itself"), std::string::npos) << e;
  e = error_of(compile_grammar_text("%declare X\nstart: \"x\"\n"));
  EXPECT_NE(e.find("%declare"), std::string::npos) << e;
}

TEST(StructuralTag, FreeTextThenTaggedJson) {
  auto g = ok_or_null(compile_structural_tag(R"({"type": "structural_tag",
      "structures": [{"begin": "<function=get_weather>", "schema": {"type": "object",
                      "properties": {"city": {"type": "string"}}, "required": ["city"]}, "end": "</function>"}],
      "triggers": ["<function="]})"));
  EXPECT_TRUE(accepts(g, "Let me check."));
  EXPECT_TRUE(accepts(g, R"(Sure <function=get_weather>{"city": "Paris"}</function> done)"));
  EXPECT_TRUE(accepts(g, R"(<function=get_weather>{"city": "A"}</function><function=get_weather>{"city": "B"}</function>)"));
  EXPECT_FALSE(accepts(g, R"(<function=get_weather>{"town": "Paris"}</function>)"));
  EXPECT_FALSE(accepts(g, R"(<function=other>{"city": "Paris"}</function>)"));
  EXPECT_FALSE(accepts(g, R"(<function=get_weather>{"city": "Paris"})"));
  EXPECT_NE(error_of(compile_structural_tag(R"({"structures": [{"begin": "<x>", "schema": {}, "end": "</x>"}],
                                                "triggers": ["<y"]})")).find("no trigger"),
            std::string::npos);
}

TEST(GrammarCache, SameTextSameGrammarAndFailuresCached) {
  GrammarCache cache({}, /*max_entries=*/2);
  GrammarSpec a{GrammarKind::json_schema, R"({"type":"integer"})", {}, {}};
  auto g1 = cache.get(a);
  auto g2 = cache.get(a);
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(*g1, *g2);
  GrammarSpec bad{GrammarKind::json_schema, R"({"not":{"type":"string"}})", {}, {}};
  EXPECT_FALSE(cache.get(bad).ok());
  EXPECT_FALSE(cache.get(bad).ok());
  EXPECT_EQ(cache.size(), 2u);
  GrammarSpec c{GrammarKind::regex, "[ab]+", {}, {}};
  EXPECT_TRUE(cache.get(c).ok());
  EXPECT_EQ(cache.size(), 2u);  // the least recently used went out
  GrammarSpec choice{GrammarKind::choice, "", {"x", "y"}, {}};
  EXPECT_TRUE(accepts(*cache.get(choice), "y"));
  EXPECT_GT(cache.memory_bytes(), 0u);
}

}  // namespace
}  // namespace troupe::structured
