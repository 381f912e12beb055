// The JSON Schema front end: what each keyword admits, exactly, and what is
// refused by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "runtime/text/json/python_json.hpp"
#include "tests/runtime/rank/structured/grammar_test_util.hpp"

namespace troupe::structured {
namespace {

using testing::accepts;
using testing::error_of;
using testing::ok_or_null;
using testing::prefix_ok;

std::shared_ptr<const Grammar> schema(std::string_view text, const JsonSchemaOptions& o = {}) {
  return ok_or_null(compile_json_schema_grammar(text, o));
}

std::string refusal(std::string_view text) { return error_of(compile_json_schema_grammar(text)); }

TEST(JsonSchemaGrammar, ObjectsFollowPropertyOrderRequiredAndOptional) {
  auto g = schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
                      "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"b": "x"})"));
  EXPECT_TRUE(accepts(g, R"({"a": 1, "b": "x", "c": true})"));
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":"x"})"));
  EXPECT_TRUE(accepts(g, "{\n  \"b\": \"x\"\n}"));
  EXPECT_FALSE(accepts(g, R"({"a": 1})"));               // b is required
  EXPECT_FALSE(accepts(g, R"({"b": "x", "a": 1})"));     // properties' order
  EXPECT_FALSE(accepts(g, R"({"b": "x", "d": 1})"));     // no additional properties
  EXPECT_FALSE(accepts(g, R"({"a": "1", "b": "x"})"));   // a is an integer
  EXPECT_FALSE(prefix_ok(g, std::string("{") + std::string(40, ' ')));  // whitespace runs are bounded
}

TEST(JsonSchemaGrammar, AdditionalAndPatternProperties) {
  auto g = schema(R"({"properties":{"id":{"type":"integer"}},"patternProperties":{"^x-":{"type":"string"}},
                      "additionalProperties":{"type":"boolean"}})");
  EXPECT_TRUE(accepts(g, R"({"id": 1, "x-a": "s", "other": true})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "x-a": 2})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "other": "s"})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "id": true})"));  // a declared key is never an additional one
  EXPECT_TRUE(accepts(g, "[1, 2]"));                    // no type: any value that is not an object
}

TEST(JsonSchemaGrammar, PropertyCounts) {
  auto g = schema(R"({"type":"object","minProperties":1,"maxProperties":2})");
  EXPECT_FALSE(accepts(g, "{}"));
  EXPECT_TRUE(accepts(g, R"({"a": 1})"));
  EXPECT_TRUE(accepts(g, R"({"a": 1, "b": [2]})"));
  EXPECT_FALSE(accepts(g, R"({"a": 1, "b": 2, "c": 3})"));
}

TEST(JsonSchemaGrammar, RefsDefsAndRecursion) {
  auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],
                      "additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(accepts(g, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4, "kids": []}]}]})"));
  EXPECT_FALSE(accepts(g, R"({"v": 1, "kids": [{"w": 2}]})"));
  auto escaped = schema(R"({"definitions":{"a/b":{"const":1},"c~d":{"const":2},"e%f":{"const":3}},
      "type":"array","prefixItems":[{"$ref":"#/definitions/a~1b"},{"$ref":"#/definitions/c~0d"},
      {"$ref":"#/definitions/e%25f"}],"items":false})");
  EXPECT_TRUE(accepts(escaped, "[1, 2, 3]"));
  EXPECT_FALSE(accepts(escaped, "[1, 2, 4]"));
  auto anchors = schema(R"({"$id":"https://x.test/s","$defs":{"n":{"$anchor":"num","type":"number"}},
                            "$ref":"https://x.test/s#num"})");
  EXPECT_TRUE(accepts(anchors, "1.5"));
  EXPECT_NE(refusal(R"({"$ref":"https://elsewhere.test/x.json"})").find("another document"), std::string::npos);
}

TEST(JsonSchemaGrammar, AnyOfWithNullAndTypeLists) {
  auto g = schema(R"({"type":"object","properties":{"x":{"anyOf":[{"type":"string"},{"type":"null"}]},
                      "y":{"type":["integer","null"]}},"required":["x","y"]})");
  EXPECT_TRUE(accepts(g, R"({"x": null, "y": 3})"));
  EXPECT_TRUE(accepts(g, R"({"x": "s", "y": null})"));
  EXPECT_FALSE(accepts(g, R"({"x": 1, "y": 3})"));
  EXPECT_FALSE(accepts(g, R"({"x": "s", "y": 3.5})"));
}

TEST(JsonSchemaGrammar, OneOfOnlyWhenBranchesAreDisjoint) {
  auto tagged = schema(R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"n":{"type":"integer"}},
      "required":["kind"]},{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})");
  EXPECT_TRUE(accepts(tagged, R"({"kind": "a", "n": 1})"));
  EXPECT_TRUE(accepts(tagged, R"({"kind": "b"})"));
  EXPECT_FALSE(accepts(tagged, R"({"kind": "c"})"));
  auto by_type = schema(R"({"oneOf":[{"type":"string"},{"type":"array"}]})");
  EXPECT_TRUE(accepts(by_type, R"("s")"));
  // "one of these keys, not both": exact as objects with one key and without the other
  auto exclusive = schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
                              "c":{"type":"integer"}},"oneOf":[{"required":["a"]},{"required":["b","c"]}]})");
  EXPECT_TRUE(accepts(exclusive, R"({"a": 1})"));
  EXPECT_TRUE(accepts(exclusive, R"({"b": 1, "c": 2})"));
  EXPECT_TRUE(accepts(exclusive, R"({"a": 1, "b": 2})"));  // b without c: only the first branch
  EXPECT_FALSE(accepts(exclusive, R"({"a": 1, "b": 2, "c": 3})"));
  EXPECT_FALSE(accepts(exclusive, R"({"c": 3})"));
  std::string overlap = refusal(R"({"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]})");
  EXPECT_NE(overlap.find("'oneOf'"), std::string::npos) << overlap;
}

TEST(JsonSchemaGrammar, AllOfMergesAndRefusesWhatItCannot) {
  auto g = schema(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]},
                      {"properties":{"a":{"maximum":5},"b":{"type":"string"}}}]})");
  EXPECT_TRUE(accepts(g, R"({"a": 5, "b": "x"})"));
  EXPECT_FALSE(accepts(g, R"({"a": 6})"));
  EXPECT_FALSE(accepts(g, R"({"b": "x"})"));
  auto closed = schema(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},
                                    {"properties":{"b":{}}}]})");
  EXPECT_TRUE(accepts(closed, R"({"a": 1})"));
  EXPECT_FALSE(accepts(closed, R"({"a": 1, "b": 2})"));  // b is additional to the first part
  // Merged keys in allOf's order, each branch followed through its $ref, wherever the
  // definitions are written (here the user comes before the base it extends).
  auto extended = schema(R"({"definitions":{"file":{"allOf":[{"$ref":"#/definitions/node"},{"properties":{"mode":{}}}]},
                                            "node":{"properties":{"path":{}},"required":["path"]}},
                             "$ref":"#/definitions/file"})");
  EXPECT_TRUE(accepts(extended, R"({"path": "/e", "mode": 1})"));
  EXPECT_FALSE(accepts(extended, R"({"mode": 1, "path": "/e"})"));
  std::string e = refusal(R"({"allOf":[{"patternProperties":{"^a":{}}},{"additionalProperties":false}]})");
  EXPECT_NE(e.find("patternProperties"), std::string::npos) << e;
}

TEST(JsonSchemaGrammar, RefSiblingsDependOnTheDraft) {
  auto later = schema(R"({"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":2})");
  EXPECT_TRUE(accepts(later, R"("ab")"));
  EXPECT_FALSE(accepts(later, R"("abc")"));
  auto draft7 = schema(R"({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},
                           "$ref":"#/definitions/s","maxLength":2})");
  EXPECT_TRUE(accepts(draft7, R"("abc")"));
}

TEST(JsonSchemaGrammar, EnumAndConstOfAnyValue) {
  auto g = schema(R"({"enum":["a", 1, null, {"k":[1,2]}, [true]]})");
  EXPECT_TRUE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, "1"));
  EXPECT_TRUE(accepts(g, "1.0"));
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, R"({"k": [1, 2]})"));
  EXPECT_TRUE(accepts(g, "[true]"));
  EXPECT_FALSE(accepts(g, R"({"k": [2, 1]})"));
  EXPECT_FALSE(accepts(g, R"("b")"));
  auto typed = schema(R"({"type":"string","enum":["x", 2, "yy"],"maxLength":1})");
  EXPECT_TRUE(accepts(typed, R"("x")"));
  EXPECT_FALSE(accepts(typed, "2"));
  EXPECT_FALSE(accepts(typed, R"("yy")"));
}

TEST(JsonSchemaGrammar, IntegerRangesAreExact) {
  auto g = schema(R"({"type":"integer","minimum":3,"maximum":117})");
  for (int n = -150; n <= 250; ++n) {
    EXPECT_EQ(accepts(g, std::to_string(n)), n >= 3 && n <= 117) << n;
  }
  EXPECT_FALSE(accepts(g, "03"));
  EXPECT_FALSE(accepts(g, "3.5"));
  auto ex = schema(R"({"type":"integer","exclusiveMinimum":-20,"exclusiveMaximum":7})");
  for (int n = -40; n <= 40; ++n) EXPECT_EQ(accepts(ex, std::to_string(n)), n > -20 && n < 7) << n;
  auto draft4 = schema(R"({"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":10.5})");
  for (int n = -5; n <= 15; ++n) EXPECT_EQ(accepts(draft4, std::to_string(n)), n > 0 && n <= 10) << n;
  auto big = schema(R"({"type":"integer","minimum":-9223372036854775808,"maximum":18446744073709551615})");
  EXPECT_TRUE(accepts(big, "18446744073709551615"));
  EXPECT_FALSE(accepts(big, "18446744073709551616"));
  EXPECT_TRUE(accepts(big, "-9223372036854775808"));
  EXPECT_FALSE(accepts(big, "-9223372036854775809"));
}

TEST(JsonSchemaGrammar, NumberRanges) {
  auto g = schema(R"({"type":"number","minimum":-1.5,"exclusiveMaximum":2.25})");
  for (const char* yes : {"-1.5", "-1.49", "0", "-0", "0.0", "2", "2.249999", "-1", "1.5"}) EXPECT_TRUE(accepts(g, yes)) << yes;
  for (const char* no : {"-1.51", "-2", "2.25", "2.250", "3", "100"}) EXPECT_FALSE(accepts(g, no)) << no;
  auto unit = schema(R"({"type":"number","minimum":0,"maximum":1})");
  for (const char* yes : {"1e-05", "5E-1", "0.5e+0", "1e0", "100e-2", "0e5"}) EXPECT_TRUE(accepts(unit, yes)) << yes;
  for (const char* no : {"1e+01", "2e0", "-1e-05", "11e-1"}) EXPECT_FALSE(accepts(unit, no)) << no;
  auto positive = schema(R"({"type":"number","exclusiveMinimum":0})");
  EXPECT_TRUE(accepts(positive, "1e+300"));
  EXPECT_FALSE(accepts(positive, "0e5"));
  EXPECT_FALSE(accepts(positive, "-1e-30"));
  auto any = schema(R"({"type":"number"})");
  for (const char* yes : {"0", "-0.5", "1e10", "1.5E-3", "12"}) EXPECT_TRUE(accepts(any, yes)) << yes;
  for (const char* no : {"01", ".5", "1.", "+1", "1e"}) EXPECT_FALSE(accepts(any, no)) << no;
}

TEST(JsonSchemaGrammar, StringLengthsCountCharacters) {
  auto g = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, R"("ab")"));
  EXPECT_TRUE(accepts(g, "\"\xC3\xA9\xE2\x82\xAC\""));   // two characters, five bytes
  EXPECT_TRUE(accepts(g, R"("a\n\"")"));                 // escapes are one character each
  EXPECT_TRUE(accepts(g, R"("\ud83d\ude00x")"));         // a surrogate pair is one character
  EXPECT_FALSE(accepts(g, R"("abcd")"));
  EXPECT_FALSE(accepts(g, "\"a\nb\""));                  // a raw control character
}

TEST(JsonSchemaGrammar, PatternsSearchUnlessAnchored) {
  auto search = schema(R"({"type":"string","pattern":"[0-9]{3}"})");
  EXPECT_TRUE(accepts(search, R"("ab123cd")"));
  EXPECT_FALSE(accepts(search, R"("ab12cd")"));
  auto anchored = schema(R"({"type":"string","pattern":"^[a-z]+-[0-9]+$","maxLength":6})");
  EXPECT_TRUE(accepts(anchored, R"("ab-12")"));
  EXPECT_FALSE(accepts(anchored, R"("ab-12x")"));
  EXPECT_FALSE(accepts(anchored, R"("abcd-12")"));
  auto quote = schema(R"({"type":"string","pattern":"^a\"b$"})");
  EXPECT_TRUE(accepts(quote, R"("a\"b")"));
}

TEST(JsonSchemaGrammar, Formats) {
  auto dt = schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(accepts(dt, R"("2024-02-29T12:30:00Z")"));
  EXPECT_TRUE(accepts(dt, R"("2023-12-31T23:59:60.5+05:30")"));
  EXPECT_FALSE(accepts(dt, R"("2023-02-29T12:30:00Z")"));  // not a leap year
  EXPECT_FALSE(accepts(dt, R"("2023-04-31T12:30:00Z")"));
  EXPECT_FALSE(accepts(dt, R"("2023-01-01 12:30:00")"));
  auto date = schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(accepts(date, R"("2000-02-29")"));
  EXPECT_FALSE(accepts(date, R"("1900-02-29")"));
  auto uuid = schema(R"({"format":"uuid"})");
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567-e89b-12d3-a456")"));
  EXPECT_TRUE(accepts(uuid, "5"));  // formats apply to strings only
  auto ip = schema(R"({"type":"string","format":"ipv4"})");
  EXPECT_TRUE(accepts(ip, R"("192.168.0.255")"));
  EXPECT_FALSE(accepts(ip, R"("192.168.0.256")"));
  auto ip6 = schema(R"({"type":"string","format":"ipv6"})");
  for (const char* yes : {R"("::1")", R"("2001:db8::8a2e:370:7334")", R"("::ffff:10.0.0.1")", R"("1:2:3:4:5:6:7:8")"}) {
    EXPECT_TRUE(accepts(ip6, yes)) << yes;
  }
  EXPECT_FALSE(accepts(ip6, R"("1:2:3:4:5:6:7:8:9")"));
  EXPECT_FALSE(accepts(ip6, R"("1::2::3")"));
  auto email = schema(R"({"type":"string","format":"email"})");
  EXPECT_TRUE(accepts(email, R"("john.doe@example.com")"));
  EXPECT_FALSE(accepts(email, R"("john@")"));
  auto uri = schema(R"({"type":"string","format":"uri"})");
  EXPECT_TRUE(accepts(uri, R"("https://example.com:8080/a/b?q=1#f")"));
  EXPECT_FALSE(accepts(uri, R"("example.com/a")"));
  EXPECT_FALSE(accepts(uri, R"("http://a:b/")"));  // a port is digits
  auto duration = schema(R"({"type":"string","format":"duration"})");
  EXPECT_TRUE(accepts(duration, R"("P3DT12H30M5S")"));
  EXPECT_FALSE(accepts(duration, R"("P")"));
  auto host = schema(R"({"type":"string","format":"hostname"})");
  EXPECT_TRUE(accepts(host, R"("a-b.example.com")"));
  EXPECT_FALSE(accepts(host, R"("-a.example.com")"));
  auto custom = schema(R"({"type":"string","format":"my-own-format"})");  // an annotation
  EXPECT_TRUE(accepts(custom, R"("anything")"));
  EXPECT_NE(refusal(R"({"type":"string","format":"regex"})").find("'format'"), std::string::npos);
}

TEST(JsonSchemaGrammar, Arrays) {
  auto g = schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],
                      "items":{"type":"boolean"},"minItems":1,"maxItems":4})");
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_TRUE(accepts(g, R"(["a"])"));
  EXPECT_TRUE(accepts(g, R"(["a", 1, true, false])"));
  EXPECT_FALSE(accepts(g, R"(["a", 1, true, false, true])"));
  EXPECT_FALSE(accepts(g, R"([1])"));
  auto draft4 = schema(R"({"items":[{"type":"string"}],"additionalItems":false})");
  EXPECT_TRUE(accepts(draft4, R"(["a"])"));
  EXPECT_FALSE(accepts(draft4, R"(["a", "b"])"));
}

TEST(JsonSchemaGrammar, UnknownKeywordsAreIgnoredRefusedOnesNamed) {
  auto g = schema(R"({"type":"object","decription":"typo","x-extra":{"a":1},"id":"thing",
                      "properties":{"a":{"type":"integer","self":{}}}})");
  EXPECT_TRUE(accepts(g, R"({"a": 1})"));
  for (const char* kw : {"not", "if", "uniqueItems", "multipleOf", "dependencies", "contains"}) {
    std::string s = std::string(R"({"type":"array",")") + kw + R"(":)" +
                    (std::string(kw) == "uniqueItems" ? "true" : std::string(kw) == "multipleOf" ? "3" :
                     std::string(kw) == "dependencies" ? R"({"a":["b"]})" : "{\"type\":\"integer\"}") +
                    (std::string(kw) == "if" ? R"(,"then":{}})" : "}");
    std::string e = refusal(s);
    EXPECT_NE(e.find(std::string("'") + kw + "'"), std::string::npos) << s << " -> " << e;
  }
}

TEST(JsonSchemaGrammar, WhitespaceOptions) {
  JsonSchemaOptions compact;
  compact.compact = true;
  auto c = schema(R"({"type":"object","properties":{"a":{"type":"integer"}}})", compact);
  EXPECT_TRUE(accepts(c, R"({"a":1})"));
  EXPECT_FALSE(accepts(c, R"({"a": 1})"));
  JsonSchemaOptions pattern;
  pattern.whitespace_pattern = "[ ]?";
  auto p = schema(R"({"type":"array"})", pattern);
  EXPECT_TRUE(accepts(p, "[1, 2]"));
  EXPECT_FALSE(accepts(p, "[1,\n2]"));
}

TEST(JsonSchemaGrammar, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "{}";
  for (int i = 0; i < 3000; ++i) deep = R"({"type":"object","properties":{"a":)" + deep + "}}";
  EXPECT_NE(refusal(deep).find("nested"), std::string::npos);
  std::string optional_chain;
  for (int i = 0; i < 50000; ++i) optional_chain += "a?";
  auto g = compile_json_schema_grammar(R"({"type":"string","pattern":"^)" + optional_chain + R"($"})");
  if (g.ok()) {
    GrammarMatcher m(*g, testing::byte_vocab());
    std::vector<uint64_t> bits(testing::byte_vocab()->mask_words());
    (void)m.accept_bytes("\"aaa");
    Status st = m.fill_mask(bits.data());  // an error naming a limit, or a mask: never a crash
    if (!st.ok()) {
      EXPECT_NE(st.message().find("limit"), std::string::npos) << st.to_string();
    }
  }
}

TEST(JsonSchemaGrammar, BadInputEndsInBoundedTime) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  // Mutually recursive references with nothing to stop them: no value can be written.
  EXPECT_FALSE(compile_json_schema_grammar(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},
                                               "$ref":"#/$defs/a","type":"object","required":["x"],
                                               "properties":{"x":{"$ref":"#"}}})").ok());
  // 100k enum values.
  std::string big = R"({"enum":[)";
  for (int i = 0; i < 100000; ++i) big += fmt::format("{}\"v{}\"", i ? "," : "", i);
  big += "]}";
  auto g = compile_json_schema_grammar(big);
  EXPECT_TRUE(g.ok());
  if (g.ok()) {
    EXPECT_TRUE(accepts(*g, R"("v99999")"));
  }
  // A pattern with a huge count and a nested anyOf product.
  EXPECT_TRUE(compile_json_schema_grammar(R"({"type":"string","pattern":"^(a|aa)*b{1,100000}$"})").ok());
  std::string nested = "{\"type\":\"integer\"}";
  for (int i = 0; i < 40; ++i) nested = R"({"anyOf":[)" + nested + R"(,{"type":"string","maxLength":)" + std::to_string(i) + "}]}";
  (void)compile_json_schema_grammar(nested);
  EXPECT_LT(std::chrono::duration<double>(clock::now() - t0).count(), 10.0);
  GrammarLimits tight;
  tight.compile_seconds = 0.001;
  std::string e = error_of(compile_json_schema_grammar(big, {}, tight));
  EXPECT_NE(e.find("time limit"), std::string::npos) << e;
  // Random enum values share few suffixes: their regex is big.
  std::mt19937 rng(7);
  std::string random = R"({"enum":[)";
  for (int i = 0; i < 20000; ++i) {
    std::string v;
    for (int k = 0; k < 12; ++k) v += static_cast<char>('a' + rng() % 26);
    random += (i ? ",\"" : "\"") + v + "\"";
  }
  random += "]}";
  GrammarLimits small;
  small.memory_bytes = 1 << 20;
  e = error_of(compile_json_schema_grammar(random, {}, small));
  EXPECT_NE(e.find("memory limit"), std::string::npos) << e;
}

}  // namespace
}  // namespace troupe::structured
