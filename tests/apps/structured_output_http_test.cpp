// Structured outputs through a real `troupe serve` on loopback: response_format
// {"type": "json_object"} gives text that nlohmann's parser accepts (a whole
// object when the model ended it, else a prefix of one), whole and streamed
// alike; JSON schemas and choices hold; SmolLM2 answers as a JSON object, a
// schema's object and a choice; every kind through SmolLM2 with each finished
// output checked by independent validators (tests/apps/structured_outputs_check.py:
// jsonschema, re, lark, pydantic through the OpenAI SDK); refused keywords and
// bad grammars are 400s naming the keyword or the line and column; bad input is
// bounded by the limits the flags set.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <set>
#include <utility>
#include <vector>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

// nlohmann on a prefix: it parses, or fails only at the end of the input.
bool json_prefix(const std::string& text) {
  try {
    (void)json::parse(text).is_discarded();
    return true;
  } catch (const json::parse_error& e) {
    return e.byte == text.size() + 1;
  } catch (const json::out_of_range&) {
    return true;
  }
}

TEST(StructuredOutputHttp, JsonObjectTextIsJsonWholeAndStreamed) {
  tests::ServeProcess server({"--max-model-len", "256"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  int whole = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 48}, {"temperature", 1.0}, {"seed", seed},
                       {"response_format", {{"type", "json_object"}}}};
    json r = tests::post_json(server, "/v1/completions", body);
    const std::string text = r["choices"][0]["text"];
    const std::string reason = r["choices"][0]["finish_reason"];
    SCOPED_TRACE(text);
    ASSERT_FALSE(text.empty());
    EXPECT_TRUE(json_prefix(text));
    if (reason == "stop") {
      EXPECT_TRUE(json::parse(text).is_object());
      ++whole;
    }
    // Streamed: the same text, piece by piece.
    json streamed_body = body;
    streamed_body["stream"] = true;
    std::string streamed;
    http::SseParser sse;
    auto s = http::request("127.0.0.1", server.port(), "POST", "/v1/completions", streamed_body.dump(),
                           {{"Content-Type", "application/json"}},
                           [&](std::string_view piece) {
                             sse.feed(piece, [&](std::string_view d) {
                               if (d == "[DONE]") return;
                               json chunk = json::parse(d, nullptr, false);
                               if (chunk.is_object() && chunk.contains("choices") && !chunk["choices"].empty())
                                 streamed += chunk["choices"][0]["text"].get<std::string>();
                             });
                             return true;
                           },
                           std::chrono::seconds(120));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(streamed, text);
  }
  // Logprobs stay the model's (vLLM's raw logprobs): the first token's alternatives are
  // the same with and without the mask.
  auto first_top = [&](bool json_mode) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}, {"logprobs", 3}};
    if (json_mode) body["response_format"] = {{"type", "json_object"}};
    return tests::post_json(server, "/v1/completions", body)["choices"][0]["logprobs"]["top_logprobs"][0];
  };
  const json masked = first_top(true), unmasked = first_top(false);
  ASSERT_EQ(masked.size(), 3u) << masked.dump();
  EXPECT_EQ(masked, unmasked);
  // The same prompt without it is not JSON (stories260K tells stories).
  json plain = tests::post_json(server, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}});
  EXPECT_FALSE(json_prefix(plain["choices"][0]["text"])) << plain.dump();
  json schema = tests::post_json(server, "/v1/completions",
                     {{"prompt", "x"},
                      {"response_format",
                       {{"type", "json_schema"},
                        {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}, {"not", {{"required", {"a"}}}}}}}}}}},
                     400);
  EXPECT_EQ(schema["error"]["param"], "response_format");
  EXPECT_NE(schema["error"]["message"].get<std::string>().find("'not'"), std::string::npos) << schema.dump();
  RecordProperty("whole_objects", whole);
}

// A schema's keys, types, enum and item count hold in every output (stories260K, sampled).
TEST(StructuredOutputHttp, JsonSchemaOutputsFollowTheSchema) {
  tests::ServeProcess server({"--max-model-len", "512"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  // Bounded outputs (no free strings or numbers), so that most runs end within max_tokens.
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"mood", {{"enum", {"happy", "sad"}}}},
                         {"count", {{"enum", {1, 2, 3}}}},
                         {"names", {{"type", "array"}, {"items", {{"enum", {"Lily", "Tom"}}}}, {"maxItems", 2}}}}},
                       {"required", {"mood", "count"}},
                       {"additionalProperties", false}};
  int whole = 0;
  // stories260K pads with whitespace wherever it may (runs of up to 20 bytes).
  for (int seed = 1; seed <= 4; ++seed) {
    json r = tests::post_json(server, "/v1/completions",
                  {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"temperature", 1.0}, {"seed", seed},
                   {"guided_json", schema}});
    const std::string text = r["choices"][0]["text"];
    SCOPED_TRACE(text);
    EXPECT_TRUE(json_prefix(text));
    if (r["choices"][0]["finish_reason"] != "stop") continue;
    ++whole;
    json v = json::parse(text);
    ASSERT_TRUE(v.is_object());
    EXPECT_TRUE(v["mood"] == "happy" || v["mood"] == "sad");
    EXPECT_TRUE(v["count"].is_number_integer());
    for (const auto& [k, x] : v.items()) EXPECT_TRUE(k == "mood" || k == "count" || k == "names") << k;
    if (v.contains("names")) {
      EXPECT_LE(v["names"].size(), 2u);
    }
  }
  EXPECT_GT(whole, 0) << "no output finished within 480 tokens";
}

// guided_choice: the output is exactly one of the choices, whatever the model would say.
TEST(StructuredOutputHttp, GuidedChoiceGivesOneOfTheChoices) {
  tests::ServeProcess server({"--max-model-len", "256"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const std::vector<std::string> choices = {"Lily", "Tom", "a big red dragon", "a big dog"};
  std::set<std::string> seen;
  for (int seed = 1; seed <= 12; ++seed) {
    json r = tests::post_json(server, "/v1/completions",
                  {{"prompt", "Once upon a time there was"}, {"max_tokens", 32}, {"temperature", 1.5}, {"seed", seed},
                   {"guided_choice", choices}});
    const std::string text = r["choices"][0]["text"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << text;
    EXPECT_NE(std::find(choices.begin(), choices.end(), text), choices.end()) << text;
    seen.insert(text);
  }
  EXPECT_GT(seen.size(), 1u);  // sampled: not always the same
  // vLLM's newer form, greedy.
  json r = tests::post_json(server, "/v1/completions",
                {{"prompt", "Once upon a time there was"}, {"max_tokens", 32}, {"temperature", 0},
                 {"structured_outputs", {{"choice", {"yes", "no"}}}}});
  const std::string text = r["choices"][0]["text"];
  EXPECT_TRUE(text == "yes" || text == "no") << text;
}

TEST(StructuredOutputHttp, SmolLm2AnswersAsAJsonObject) {
  const char* model = std::getenv("TROUPE_TEST_MODEL");
  if (!model || !*model) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  tests::ServeProcess server({"--max-model-len", "512"}, model);
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  json r = tests::post_json(server, "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "What is the capital of France? Answer in JSON."}}}},
                 {"max_tokens", 64},
                 {"temperature", 0},
                 {"response_format", {{"type", "json_object"}}}});
  const std::string text = r["choices"][0]["message"]["content"];
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << text;
  json answer = json::parse(text, nullptr, false);
  ASSERT_TRUE(answer.is_object()) << text;
  EXPECT_NE(answer.dump().find("Paris"), std::string::npos) << text;
  // With a schema: the keys it declares, of their types.
  const json schema = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}},
                                       {"color", {{"enum", {"black", "white", "orange"}}}}}},
                       {"required", {"name", "age", "color"}},
                       {"additionalProperties", false}};
  r = tests::post_json(server, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "Describe a cat."}}}},
            {"max_tokens", 100},
            {"temperature", 0},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "cat"}, {"schema", schema}}}}}});
  const std::string cat_text = r["choices"][0]["message"]["content"];
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << cat_text;
  json cat = json::parse(cat_text, nullptr, false);
  ASSERT_TRUE(cat.is_object()) << cat_text;
  EXPECT_EQ(cat.size(), 3u) << cat_text;
  EXPECT_TRUE(cat["name"].is_string() && cat["age"].is_number_integer()) << cat_text;
  EXPECT_TRUE(cat["color"] == "black" || cat["color"] == "white" || cat["color"] == "orange") << cat_text;
  // A choice.
  r = tests::post_json(server, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "Is Paris the capital of France? Answer yes or no."}}}},
            {"max_tokens", 8},
            {"temperature", 0},
            {"guided_choice", {"yes", "no"}}});
  EXPECT_EQ(r["choices"][0]["message"]["content"], "yes") << r.dump();
}

// Every kind on SmolLM2, each finished output validated by a validator that is not troupe's.
TEST(StructuredOutputHttp, IndependentValidatorsAcceptEveryFinishedOutput) {
  const char* model = std::getenv("TROUPE_TEST_MODEL");
  const char* python = std::getenv("TROUPE_TEST_PYTHON");
  if (!model || !*model) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  if (!python || !*python) GTEST_SKIP() << "TROUPE_TEST_PYTHON is not set (scripts/test.sh makes its venv)";
  tests::ServeProcess server({"--max-model-len", "1024"}, model);
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const std::string cmd = fmt::format("{} {}/tests/apps/structured_outputs_check.py http://127.0.0.1:{}/v1 2>&1", python,
                                      TROUPE_SOURCE_DIR, server.port());
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  EXPECT_EQ(rc, 0) << out << "\n" << server.log().substr(0, 4000);
  EXPECT_NE(out.find("all structured outputs valid"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

// What cannot be enforced is a 400 naming the keyword (or the grammar's line and column);
// unknown keywords are ignored; every kind vLLM names is accepted.
TEST(StructuredOutputHttp, RefusalsNameTheKeywordOrTheLine) {
  tests::ServeProcess server({"--max-model-len", "256"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  auto completion = [&](json fields, int want) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
    body.update(fields);
    return tests::post_json(server, "/v1/completions", body, want);
  };
  const std::vector<std::pair<std::string, json>> refused = {
      {"not", {{"not", {{"type", "string"}}}}},
      {"if", {{"if", {{"required", {"a"}}}}, {"then", {{"required", {"b"}}}}}},
      {"uniqueItems", {{"type", "array"}, {"uniqueItems", true}}},
      {"dependentSchemas", {{"dependentSchemas", {{"a", {{"required", {"b"}}}}}}}},
      {"multipleOf", {{"type", "number"}, {"multipleOf", 0.5}}}};
  for (const auto& [keyword, schema] : refused) {
    json e = completion({{"guided_json", schema}}, 400);
    EXPECT_EQ(e["error"]["param"], "guided_json");
    EXPECT_NE(e["error"]["message"].get<std::string>().find("'" + keyword + "'"), std::string::npos) << e.dump();
  }
  // Unknown keywords and annotations: ignored (JSON Schema's rule).
  completion({{"guided_json", {{"type", "object"}, {"decription", "x"}, {"x-y", 1}, {"title", "t"}}}}, 200);
  // A grammar's error: the line and column.
  json e = completion({{"structured_outputs", {{"grammar", "start: item\nitem: \"a\" | (\n"}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "structured_outputs");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("line"), std::string::npos) << e.dump();
  e = completion({{"guided_grammar", "root ::= \"a\" undefined_rule"}}, 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("undefined_rule"), std::string::npos) << e.dump();
  e = completion({{"structured_outputs", {{"regex", "(a"}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "structured_outputs");
  // Two constraints at once: the second is named.
  e = completion({{"guided_regex", "a+"}, {"guided_choice", {"a"}}}, 400);
  EXPECT_EQ(e["error"]["param"], "guided_choice");
  // Accepted: one engine whatever guided_decoding_backend says; a regex and a GBNF grammar hold.
  json r = completion({{"guided_regex", "[0-9]{2}-[a-c]{2}"}, {"guided_decoding_backend", "xgrammar"}}, 200);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
  const std::string text = r["choices"][0]["text"];
  ASSERT_EQ(text.size(), 5u) << text;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(text[0])) && text[2] == '-') << text;
  r = completion({{"guided_grammar", "root ::= (\"ab\" | \"cd\")+ \".\""}, {"max_tokens", 32}}, 200);
  const std::string g = r["choices"][0]["text"];
  if (r["choices"][0]["finish_reason"] == "stop") {
    ASSERT_FALSE(g.empty());
    EXPECT_EQ(g.back(), '.') << g;
  }
  for (size_t i = 0; i + 1 < g.size(); i += 2) EXPECT_TRUE(g.substr(i, 2) == "ab" || g.substr(i, 2) == "cd") << g;
}

// Bad input is bounded: a 100k-value enum under a small --structured-outputs-max-memory-mib
// and a deep chain of $ref answer a 400 naming the limit, not a hang (the compile stops at
// its 1 s limit; the bound here leaves room for a loaded CI machine); with the
// defaults a 100k enum is served.
TEST(StructuredOutputHttp, BadInputIsBoundedByTheFlags) {
  tests::ServeProcess server({"--max-model-len", "256", "--max-body-bytes", "16777216",
                              "--structured-outputs-max-memory-mib", "8", "--structured-outputs-compile-timeout-s", "1"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  std::mt19937 rng(7);
  json values = json::array();
  for (int i = 0; i < 100000; ++i) {
    std::string v;
    for (int k = 0; k < 12; ++k) v += static_cast<char>('a' + rng() % 26);
    values.push_back(v);
  }
  auto timed = [&](const json& schema) {
    auto t0 = std::chrono::steady_clock::now();
    json e = tests::post_json(server, "/v1/completions",
                              {{"prompt", "x"}, {"max_tokens", 4}, {"guided_json", schema}}, 400);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
    return e["error"]["message"].get<std::string>();
  };
  std::string m = timed({{"enum", values}});
  EXPECT_NE(m.find("limit"), std::string::npos) << m;
  // $ref after $ref, 20000 deep.
  json defs = json::object();
  const int n = 20000;
  for (int i = 0; i < n; ++i)
    defs[fmt::format("d{}", i)] = {{"type", "object"}, {"properties", {{"x", {{"$ref", fmt::format("#/$defs/d{}", i + 1)}}}}}};
  defs[fmt::format("d{}", n)] = {{"type", "integer"}};
  m = timed({{"$defs", defs}, {"$ref", "#/$defs/d0"}});
  EXPECT_NE(m.find("limit"), std::string::npos) << m;
}

}  // namespace
}  // namespace troupe
