// The JSON recognizer against nlohmann's parser (valid and invalid documents,
// every prefix), JSON schemas (compile errors, what a schema admits, checked by
// a small independent validator), and the token masker on a small vocabulary:
// random walks that only take allowed tokens always stay a JSON prefix, and end
// only on a whole object that nlohmann parses (and the schema admits).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/rank/structured/json_matcher.hpp"
#include "runtime/rank/structured/json_schema.hpp"
#include "runtime/rank/structured/json_token_masker.hpp"

namespace troupe::structured {
namespace {

using json = nlohmann::json;

bool accepts(const std::string& text) {
  JsonMatcher m;
  return m.feed(text);
}
bool whole(const std::string& text) {
  JsonMatcher m;
  return m.feed(text) && m.complete();
}

// nlohmann's verdict on a prefix: parses, or fails only at the end of the input. (Sound
// one way only: its lexer also reports some impossible prefixes, "{-", at the end.) A
// number too large for a double is still valid JSON.
bool nlohmann_prefix(const std::string& text) {
  try {
    json parsed = json::parse(text);
    return !parsed.is_discarded();
  } catch (const json::parse_error& e) {
    return e.byte == text.size() + 1;
  } catch (const json::out_of_range&) {
    return true;
  }
}
// nlohmann parses the whole text as an object.
bool nlohmann_object(const std::string& text) {
  try {
    return json::parse(text).is_object();
  } catch (const json::out_of_range&) {  // parsed, but a number is too large for a double
    const size_t first = text.find_first_not_of(" \t\r\n");
    return first != std::string::npos && text[first] == '{';
  } catch (const json::parse_error&) {
    return false;
  }
}

// The tokens of a vocabulary of n that the masker leaves at `state` (not set to -inf).
std::vector<int32_t> allowed_tokens(JsonTokenMasker& masker, const JsonMatcher& state, int32_t n) {
  std::vector<float> logits(static_cast<size_t>(n), 0.0f);
  masker.mask(state, logits.data());
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < n; ++id)
    if (logits[static_cast<size_t>(id)] == 0.0f) allowed.push_back(id);
  return allowed;
}

TEST(JsonMatcher, WholeObjectsAndEveryPrefix) {
  const std::string docs[] = {
      R"({})",
      R"( { "a" : 1 } )",
      R"({"a":[1,-2.5e+3,0,0.25,1E9,true,false,null,"x\"y\\z\u00e9\n",{}],"b":{"c":[]}})",
      "{\n  \"name\": \"Felix\",\n  \"age\": 10\n}",
      R"({"emoji":"é😀","k":-0})",
  };
  for (const auto& d : docs) {
    std::string doc = d;
    while (!doc.empty() && doc.back() == ' ') doc.pop_back();  // nothing may follow the object
    EXPECT_TRUE(whole(doc)) << doc;
    EXPECT_TRUE(nlohmann_object(doc)) << doc;
    for (size_t n = 0; n < doc.size(); ++n) {
      JsonMatcher m;
      ASSERT_TRUE(m.feed(doc.substr(0, n))) << doc.substr(0, n);
      EXPECT_FALSE(m.complete()) << doc.substr(0, n);
    }
  }
}

TEST(JsonMatcher, RefusesWhatIsNotAnObjectPrefix) {
  for (const char* bad : {"[1]", "1", "\"a\"", "{a", "{\"a\" 1", "{\"a\":01", "{\"a\":1.}", "{\"a\":-}", "{\"a\":tru}",
                          "{\"a\":1,}", "{\"a\":[1,]}", "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g\"}",
                          "{}}", "{} ", "{\"a\":1]", "{\"a\":[1}", "{\"a\":nul1}", "{\"a\":1e}", "{\"a\":+1}"}) {
    EXPECT_FALSE(accepts(bad)) << bad;
    EXPECT_FALSE(nlohmann_prefix(bad) && !std::string(bad).empty() && bad[0] == '{' && whole(bad)) << bad;
  }
  // Depth and whitespace are bounded.
  // (Built with append: GCC 12 warns falsely about `literal + std::string(n, c)`.)
  auto repeated = [](std::string head, size_t n, char c) { return head.append(n, c); };
  EXPECT_TRUE(accepts(repeated("{\"a\":", JsonMatcher::kMaxDepth - 1, '[')));
  EXPECT_FALSE(accepts(repeated("{\"a\":", JsonMatcher::kMaxDepth, '[')));
  EXPECT_TRUE(accepts(repeated("{", JsonMatcher::kMaxWhitespaceRun, ' ')));
  EXPECT_FALSE(accepts(repeated("{", JsonMatcher::kMaxWhitespaceRun + 1, ' ')));
  EXPECT_TRUE(accepts(repeated("{\"", 500, ' ')));  // inside a string, spaces are content
  // A refused byte leaves the state as it was.
  JsonMatcher m;
  ASSERT_TRUE(m.feed("{\"a\":1"));
  const std::string before = m.key();
  EXPECT_FALSE(m.feed(static_cast<uint8_t>('x')));
  EXPECT_EQ(m.key(), before);
  EXPECT_TRUE(m.feed("}"));
  EXPECT_TRUE(m.complete());
}

// Random byte strings against nlohmann, in the directions its errors are exact.
TEST(JsonMatcher, AgreesWithNlohmannOnRandomText) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]:,\"\\ 0123456789-+.eEtrufalsn";
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text = "{";
    const int len = static_cast<int>(rng() % 12);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    JsonMatcher m;
    const bool ours = m.feed(text);
    if (ours) ++accepted;
    // Whole objects agree both ways; an accepted prefix fails nlohmann only at its end.
    EXPECT_EQ(ours && m.complete(), nlohmann_object(text)) << text;
    if (ours) {
      EXPECT_TRUE(nlohmann_prefix(text)) << text;
    }
  }
  EXPECT_GT(accepted, 500);
}

TEST(JsonTokenMasker, RandomWalksOverAllowedTokensStayValidAndEndWhole) {
  const std::vector<std::string> texts = {"{",  "}",   "[",  "]",    ",",  ":",     "\"",    "\"a\"", "\"key\":",
                                          "1",  "23",  "-", ".5",   "e7", "true",  "null",  " ",     "\n  ",
                                          "x",  "ab", "\\n", "{\"", "\"}", "},{", "",       "é",     "0"};
  const int32_t eog = static_cast<int32_t>(texts.size());  // a special token past the texts
  JsonTokenMasker masker(texts, {eog}, eog + 1);
  std::mt19937 rng(11);
  int finished = 0;
  for (int walk = 0; walk < 300; ++walk) {
    JsonMatcher state;
    std::string out;
    for (int step = 0; step < 60; ++step) {
      const std::vector<int32_t> allowed = allowed_tokens(masker, state, eog + 1);
      ASSERT_FALSE(allowed.empty()) << out;
      EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 24), 0);  // "" (special) never
      const int32_t pick = allowed[rng() % allowed.size()];
      if (pick == eog) {
        ASSERT_TRUE(state.complete()) << out;
        EXPECT_TRUE(nlohmann_object(out)) << json(out).dump();
        ++finished;
        break;
      }
      ASSERT_TRUE(state.feed(texts[static_cast<size_t>(pick)])) << out << " + " << texts[static_cast<size_t>(pick)];
      out += texts[static_cast<size_t>(pick)];
      ASSERT_TRUE(nlohmann_prefix(out)) << out;
      if (state.complete()) {
        EXPECT_EQ(allowed.size() == 1 && allowed[0] == eog, false);  // the step before offered more
      }
    }
  }
  EXPECT_GT(finished, 10);
  EXPECT_GT(masker.cached_states(), 5u);
  // A complete object allows only the end; an impossible vocabulary falls back to the end.
  JsonMatcher done;
  ASSERT_TRUE(done.feed("{}"));
  std::vector<float> logits(static_cast<size_t>(eog + 1), 1.0f);
  masker.mask(done, logits.data());
  for (int32_t id = 0; id < eog; ++id) EXPECT_TRUE(std::isinf(logits[static_cast<size_t>(id)])) << id;
  EXPECT_EQ(logits[static_cast<size_t>(eog)], 1.0f);
  JsonTokenMasker no_brace({"a", "b"}, {2}, 3);
  std::vector<float> l2(3, 0.0f);
  no_brace.mask(JsonMatcher{}, l2.data());
  EXPECT_EQ(l2[2], 0.0f);
  EXPECT_TRUE(std::isinf(l2[0]) && std::isinf(l2[1]));
}


// An independent check of the keywords compile_json_schema supports.
bool admits(const json& schema, const json& v) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("const") && v != schema["const"]) return false;
  if (schema.contains("enum")) {
    bool any = false;
    for (const auto& e : schema["enum"]) any = any || e == v;
    if (!any) return false;
  }
  if (schema.contains("type")) {
    json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const auto& t : types) {
      const std::string n = t;
      ok = ok || (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
           (n == "string" && v.is_string()) ||
           // (an integer past 64 bits reads as a double)
           (n == "integer" && (v.is_number_integer() || (v.is_number_float() && std::fabs(v.get<double>()) >= 1.8e19))) ||
           (n == "number" && v.is_number()) || (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null());
    }
    if (!ok) return false;
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const auto& r : schema.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, sub] : v.items()) {
      if (props.contains(k)) {
        if (!admits(props[k], sub)) return false;
      } else if (schema.contains("additionalProperties") && !admits(schema["additionalProperties"], sub)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return false;
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return false;
    if (schema.contains("items"))
      for (const auto& item : v)
        if (!admits(schema["items"], item)) return false;
  }
  return true;
}

const json kCatSchema = json::parse(R"({
  "type": "object", "title": "cat",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "weight": {"type": ["number", "null"]},
    "color": {"enum": ["black", "white", 7, null]},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
    "ok": {"const": true},
    "we\"ird": {"type": "boolean"}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})");

TEST(JsonSchema, CompileRefusesWhatItCannotEnforce) {
  EXPECT_TRUE(compile_json_schema(kCatSchema.dump()).ok());
  const std::pair<const char*, const char*> bad[] = {
      {R"({"type":"string"})", "root"},
      {R"({"type":"object","anyOf":[{"properties":{"a":{"type":"string"}}}]})", "anyOf"},
      {R"({"type":"object","anyOf":[{"properties":{"a":{"const":1}},"required":["a"]},
                                    {"properties":{"a":{"const":1}},"required":["a"]}]})", "anyOf"},
      {R"({"type":"object","properties":{"a":{"type":"string","pattern":"x"}}})", "pattern"},
      {R"({"type":"object","anyOf":[]})", "anyOf"},
      {R"({"type":"object","properties":{"a":{"$ref":"#/x"}}})", "$ref"},
      {R"({"type":"object","required":["b"],"properties":{"a":{}}})", "'b'"},
      {R"({"type":"object","properties":{"a":{"type":"decimal"}}})", "decimal"},
      {R"({"type":"object","properties":{"a":{"type":"array","minItems":3,"maxItems":2}}})", "minItems"},
      {R"({"type":"object","properties":{"a":{"enum":[]}}})", "enum"},
      {R"(not json)", "valid JSON"},
  };
  for (const auto& [schema, word] : bad) {
    auto c = compile_json_schema(schema);
    ASSERT_FALSE(c.ok()) << schema;
    EXPECT_NE(c.status().message().find(word), std::string::npos) << c.status().message();
  }
  // A property name the matcher could never complete (it keeps 128 bytes of a key) is
  // refused, not accepted to end inside the key; 128 bytes still compile and match.
  const std::string at_limit(128, 'k'), over(129, 'k');
  auto long_key = compile_json_schema(
      nlohmann::json{{"type", "object"}, {"additionalProperties", false}, {"properties", {{over, {}}}}}.dump());
  ASSERT_FALSE(long_key.ok());
  EXPECT_NE(long_key.status().message().find("129 bytes long; at most 128"), std::string::npos)
      << long_key.status().message();
  auto fits = compile_json_schema(nlohmann::json{{"type", "object"},
                                                 {"additionalProperties", false},
                                                 {"required", {at_limit}},
                                                 {"properties", {{at_limit, {{"type", "integer"}}}}}}
                                      .dump());
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  JsonMatcher m(fits->get());
  EXPECT_TRUE(m.feed("{\"" + at_limit + "\":1}") && m.complete());
}

TEST(JsonSchema, TheMatcherAdmitsWhatTheSchemaAdmits) {
  auto schema = compile_json_schema(kCatSchema.dump());
  ASSERT_TRUE(schema.ok());
  auto whole_for = [&](const std::string& text) {
    JsonMatcher m(schema->get());
    return m.feed(text) && m.complete();
  };
  const char* good[] = {
      R"({"name":"Tom","age":3})",
      R"({"age":3,"name":"Tom","weight":4.5,"color":"black","tags":["a"],"ok":true,"we\"ird":false})",
      R"({ "name" : "x" , "age" : -0 , "weight" : null , "color" : 7 , "tags" : [ "a" , "b" ] })",
      R"({"name":"","age":12,"color":null})",
  };
  for (const char* text : good) {
    EXPECT_TRUE(whole_for(text)) << text;
    EXPECT_TRUE(admits(kCatSchema, json::parse(text))) << text;
  }
  const char* wrong[] = {
      R"({"name":"Tom"})",                          // age is required
      R"({"name":"Tom","age":3.5})",                // not an integer
      R"({"name":"Tom","age":"3"})",                // not a number
      R"({"name":"Tom","age":3,"size":1})",         // no undeclared keys
      R"({"name":"Tom","age":3,"name":"Jim"})",     // a key twice
      R"({"name":"Tom","age":3,"color":"blue"})",   // not in the enum
      R"({"name":"Tom","age":3,"color":"blackish"})",
      R"({"name":"Tom","age":3,"tags":[]})",        // minItems 1
      R"({"name":"Tom","age":3,"tags":["a","b","c"]})",
      R"({"name":"Tom","age":3,"tags":[1]})",
      R"({"name":"Tom","age":3,"ok":false})",
      R"({"name":"Tom","age":3,"weight":"heavy"})",
  };
  for (const char* text : wrong) {
    EXPECT_FALSE(whole_for(text)) << text;
    const json parsed = json::parse(text, nullptr, false);
    if (!parsed.is_discarded()) {
      EXPECT_FALSE(admits(kCatSchema, parsed) && std::string(text).find("\"name\":\"Jim\"") == std::string::npos)
          << text;
    }
  }
  // Undeclared keys are allowed by default (JSON Schema), with the schema given for them.
  auto open = compile_json_schema(R"({"type":"object","properties":{"a":{"type":"integer"}},
                                      "additionalProperties":{"type":"string"}})");
  ASSERT_TRUE(open.ok());
  JsonMatcher m(open->get());
  EXPECT_TRUE(m.feed(R"({"a":1,"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb":"x"})"));
  EXPECT_TRUE(m.complete());
  JsonMatcher n(open->get());
  EXPECT_FALSE(n.feed(R"({"a":1,"b":2})"));
}

// vLLM's schema of tool_choice "required": a list of calls, each one of the tools by name
// with that tool's parameters (anyOf over the tools, told apart by the name).
const json kToolCallsSchema = json::parse(R"({
  "type": "array", "minItems": 1,
  "items": {"type": "object", "anyOf": [
    {"properties": {"name": {"type": "string", "enum": ["get_weather"]},
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"], "additionalProperties": false}},
     "required": ["name", "parameters"]},
    {"properties": {"name": {"type": "string", "enum": ["get_time"]},
                    "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}},
                                   "required": ["zone"], "additionalProperties": false}},
     "required": ["name", "parameters"]}]}
})");

TEST(JsonSchema, ATaggedUnionOfObjectsPicksItsBranchByTheTag) {
  auto schema = compile_json_schema(kToolCallsSchema.dump());
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  auto whole_for = [&](const std::string& text) {
    JsonMatcher m(schema->get());
    return m.feed(text) && m.complete();
  };
  for (const char* text : {R"([{"name":"get_weather","parameters":{"city":"Paris"}}])",
                           R"([{"name": "get_time", "parameters": {"zone": 2}}, {"name":"get_weather","parameters":{"city":""}}])"}) {
    EXPECT_TRUE(whole_for(text)) << text;
  }
  for (const char* text : {R"([])",                                                       // minItems 1
                           R"([{"name":"get_weather","parameters":{"zone":2}}])",          // the other tool's parameters
                           R"([{"name":"get_time","parameters":{"zone":"2"}}])",           // wrong type
                           R"([{"name":"get_weather"}])",                                  // parameters required
                           R"([{"name":"get_date","parameters":{}}])",                     // no such tool
                           R"([{"parameters":{"city":"Paris"},"name":"get_weather"}])",    // the tag comes first
                           R"([{"name":"get_weather","parameters":{"city":"P"},"name":"get_time"}])"}) {
    EXPECT_FALSE(whole_for(text)) << text;
  }
  // Tokens over the union: every walk ending is a list the schema's branches admit.
  const std::vector<std::string> texts = {"[", "]", "{", "}", ",", ":", "\"", "\"name\"", "\"parameters\":",
                                          "\"get_", "weather\"", "time\"", "\"city\"", "\"zone\"", "1", " ",
                                          "\"Paris\"", "x", "\"", "", "name\"", "parameters\"", "get_",
                                          "city\"", "zone\"", "Paris\""};
  const int32_t eog = static_cast<int32_t>(texts.size());
  JsonTokenMasker masker(texts, {eog}, eog + 1);
  std::mt19937 rng(11);
  int finished = 0;
  for (int walk = 0; walk < 300; ++walk) {
    JsonMatcher state(schema->get());
    std::string out;
    for (int step = 0; step < 100; ++step) {
      const std::vector<int32_t> allowed = allowed_tokens(masker, state, eog + 1);
      ASSERT_FALSE(allowed.empty()) << out;
      const int32_t pick = allowed[rng() % allowed.size()];
      if (pick == eog) {
        if (!state.complete()) break;  // a dead end of the small vocabulary
        const json parsed = json::parse(out, nullptr, false);
        ASSERT_TRUE(parsed.is_array()) << out;
        for (const auto& call : parsed) {
          const json& branches = kToolCallsSchema["items"]["anyOf"];
          const bool weather = call["name"] == "get_weather";
          EXPECT_TRUE(admits(branches[weather ? 0 : 1], call)) << out;
        }
        ++finished;
        break;
      }
      ASSERT_TRUE(state.feed(texts[static_cast<size_t>(pick)])) << out;
      out += texts[static_cast<size_t>(pick)];
    }
  }
  EXPECT_GT(finished, 5);
}

TEST(JsonSchema, RandomWalksOverAllowedTokensEndOnAdmittedObjects) {
  auto schema = compile_json_schema(kCatSchema.dump());
  ASSERT_TRUE(schema.ok());
  const std::vector<std::string> texts = {"{",    "}",      "[",     "]",      ",",      ":",     "\"",   "\"name\"",
                                          "\"age", "\":",   "1",     "2.5",    "-",      "null",  "true", "false",
                                          " ",    "\"a\"",  "x",     "\"black\"", "7",    "\"tags\":", "weight",
                                          "color", "ok",    "we",    "\\\"ird", "\"b\"", "",
                                          "blac",  "k\"",  "hite\""};
  const int32_t eog = static_cast<int32_t>(texts.size());
  JsonTokenMasker masker(texts, {eog}, eog + 1);
  std::mt19937 rng(5);
  int finished = 0;
  for (int walk = 0; walk < 400; ++walk) {
    JsonMatcher state(schema->get());
    std::string out;
    for (int step = 0; step < 80; ++step) {
      const std::vector<int32_t> allowed = allowed_tokens(masker, state, eog + 1);
      ASSERT_FALSE(allowed.empty()) << out;
      const int32_t pick = allowed[rng() % allowed.size()];
      if (pick == eog && !state.complete()) {
        // A dead end of this small vocabulary (no token continues, say, "\"w"): the masker
        // offers only the end, so that the request still ends.
        EXPECT_EQ(allowed.size(), 1u) << out;
        break;
      }
      if (pick == eog) {
        const json parsed = json::parse(out, nullptr, false);
        ASSERT_FALSE(parsed.is_discarded()) << out;
        EXPECT_TRUE(admits(kCatSchema, parsed)) << out;
        ++finished;
        break;
      }
      ASSERT_TRUE(state.feed(texts[static_cast<size_t>(pick)])) << out;
      out += texts[static_cast<size_t>(pick)];
      ASSERT_TRUE(nlohmann_prefix(out)) << out;
    }
  }
  EXPECT_GT(finished, 10);
}

}  // namespace
}  // namespace troupe::structured
