// The MaskBench harness's walk (bench/structured/maskbench_walk.hpp) on
// hand-written schemas and instances: valid ones accepted token by token and at
// the end, invalid ones refused, and the mask and accept_token always agreeing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/structured/maskbench_walk.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "runtime/text/json/python_json.hpp"

namespace troupe::bench {
namespace {

// Multi-byte pieces as a BPE vocabulary has them, then every single byte; the last id ends.
std::vector<std::string> texts() {
  std::vector<std::string> t = {"{\"", "\":", "\": ", "\", \"", "\"}", "\"},", ", ", "}]", "[{\"", " [", " {\"",
                                "name", "age", "tags", " \"", "Al", "ice", "12", "3", "true", "null", "\",", "\"]"};
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  t.emplace_back();
  return t;
}

// Longest match first, as a tokenizer would roughly do.
std::vector<int32_t> tokenize(const std::string& s, const std::vector<std::string>& vocab) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < s.size();) {
    int32_t best = -1;
    size_t len = 0;
    for (size_t id = 0; id + 1 < vocab.size(); ++id) {
      const std::string& v = vocab[id];
      if (v.size() > len && s.compare(i, v.size(), v) == 0) {
        best = static_cast<int32_t>(id);
        len = v.size();
      }
    }
    out.push_back(best);
    i += len;
  }
  return out;
}

TEST(MaskbenchWalk, ValidAcceptedInvalidRefused) {
  auto vocab_texts = texts();
  auto eog = static_cast<int32_t>(vocab_texts.size() - 1);
  auto vocab = structured::TokenVocabulary::create(vocab_texts, {eog}, static_cast<int64_t>(vocab_texts.size()));
  auto grammar = structured::compile_json_schema_grammar(R"({"type":"object","properties":{
      "name":{"type":"string","minLength":1},"age":{"type":"integer","minimum":0},
      "tags":{"type":"array","items":{"type":"string"},"maxItems":2}},"required":["name"],
      "additionalProperties":false})");
  ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
  struct Case {
    const char* json;
    bool valid;
  };
  for (const Case& c : {Case{R"({"name": "Alice", "age": 123, "tags": ["a", "b"]})", true},
                        Case{R"({"name": "Al"})", true},
                        Case{R"({"name": "Alice", "tags": []})", true},
                        Case{R"({"name": ""})", false},
                        Case{R"({"age": 12})", false},
                        Case{R"({"name": "Al", "age": -3})", false},
                        Case{R"({"name": "Al", "tags": ["a", "b", "c"]})", false},
                        Case{R"({"name": "Al", "extra": null})", false}}) {
    std::string text = json_io::python_json_dumps(nlohmann::ordered_json::parse(c.json));
    auto r = walk_tokens(*grammar, vocab, tokenize(text, vocab_texts));
    EXPECT_EQ(r.accepted, c.valid) << text;
    EXPECT_TRUE(r.mismatch.empty()) << text << ": " << r.mismatch;
    EXPECT_EQ(r.mask_us.size(), c.valid ? tokenize(text, vocab_texts).size() : r.tokens_allowed + 1) << text;
  }
}

TEST(MaskbenchWalk, PythonSerialization) {
  auto v = nlohmann::ordered_json::parse(R"({"b": 1.0, "a": [1e-05, 1e16, 123.5, -0.0], "s": "é\n\"", "t": true})");
  EXPECT_EQ(json_io::python_json_dumps(v),
            "{\"b\": 1.0, \"a\": [1e-05, 1e+16, 123.5, -0.0], \"s\": \"\xC3\xA9\\n\\\"\", \"t\": true}");
}

}  // namespace
}  // namespace troupe::bench
