// The JSON recognizer against nlohmann's parser (valid and invalid documents,
// every prefix), and the token masker on a small vocabulary: random walks that
// only take allowed tokens always stay a JSON prefix, and end only on a whole
// object that nlohmann parses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/structured/json_matcher.hpp"
#include "runtime/structured/json_token_masker.hpp"

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
      std::vector<float> logits(static_cast<size_t>(eog + 1), 0.0f);
      masker.mask(state, logits.data());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id <= eog; ++id)
        if (logits[static_cast<size_t>(id)] == 0.0f) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty()) << out;
      EXPECT_EQ(logits[24], -std::numeric_limits<float>::infinity());  // "" (special) never
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

}  // namespace
}  // namespace troupe::structured
