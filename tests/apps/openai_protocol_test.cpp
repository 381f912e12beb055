// Unit tests of runtime/frontend/openai: request parsing/validation and response
// rendering, without a server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/frontend/openai/errors.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "runtime/frontend/openai/render.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;

std::optional<ApiError> parse_completion(const std::string& body, CompletionRequest* out = nullptr) {
  CompletionRequest r;
  auto e = parse_completion_request(body, Limits{}, &r);
  if (out) *out = r;
  return e;
}

// What a completions body is refused with: its parse, else admission's one range check
// (SamplingParams::validate, as engine::InputProcessor runs it) under the body's names.
std::optional<ApiError> refusal(const std::string& body) {
  CompletionRequest r;
  if (auto e = parse_completion(body, &r)) return e;
  sampling::SamplingParams s = r.common.sampling;
  if (r.common.max_tokens) s.max_tokens = static_cast<int32_t>(std::clamp<int64_t>(*r.common.max_tokens, INT32_MIN, INT32_MAX));
  std::string field;
  if (Status st = s.validate(&field); !st.ok()) return admission_error(st, field, r.common);
  return std::nullopt;
}

TEST(OpenAIProtocol, ParsesAFullCompletionRequest) {
  CompletionRequest r;
  auto e = parse_completion(R"({"model":"m","prompt":"Hello","max_tokens":7,"temperature":0.5,"top_p":0.9,
      "top_k":20,"min_p":0.1,"n":2,"stop":["a","bb"],"stop_token_ids":[3,4],"seed":11,
      "presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,"logprobs":3,
      "echo":true,"ignore_eos":true,"user":"u","stream":true,"stream_options":{"include_usage":true},
      "some_unknown_field":{"x":1}})",
                            &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.common.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Hello");
  EXPECT_EQ(r.common.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.common.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.common.sampling.top_p, 0.9f);
  EXPECT_EQ(r.common.sampling.top_k, 20);
  EXPECT_EQ(r.common.n, 2);
  EXPECT_EQ(r.common.sampling.stop, (std::vector<std::string>{"a", "bb"}));
  EXPECT_EQ(r.common.sampling.stop_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(r.common.sampling.seed, 11u);
  EXPECT_EQ(r.common.sampling.logprobs, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.common.sampling.ignore_eos);
  EXPECT_TRUE(r.common.stream);
  EXPECT_TRUE(r.common.include_usage);
}

TEST(OpenAIProtocol, PromptForms) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion(R"({"prompt":["a","b"]})", &r));
  EXPECT_EQ(r.prompts.size(), 2u);
  ASSERT_FALSE(parse_completion(R"({"prompt":[1,2,3]})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(parse_completion(R"({"prompt":[[1,2],[3]]})", &r));
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].token_ids, (std::vector<int32_t>{3}));
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","stop":"end"})", &r));
  EXPECT_EQ(r.common.sampling.stop, (std::vector<std::string>{"end"}));
  // null means unset
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","temperature":null,"max_tokens":null})", &r));
  EXPECT_FALSE(r.common.max_tokens.has_value());
}

struct BadCase {
  const char* body;
  const char* param;  // expected "param"; "" for none
};

TEST(OpenAIProtocol, RejectsBadInputNamingTheField) {
  const BadCase cases[] = {
      {R"({"prompt":"x","temperature":-1})", "temperature"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","top_k":-2})", "top_k"},
      {R"({"prompt":"x","min_p":2})", "min_p"},
      {R"({"prompt":"x","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":-5})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","n":0})", "n"},
      {R"({"prompt":"x","n":100000})", "n"},
      {R"({"prompt":"x","stop":5})", "stop"},
      {R"({"prompt":"x","stop":[""]})", "stop"},
      {R"({"prompt":"x","stop_token_ids":[-1]})", "stop_token_ids"},
      {R"({"prompt":"x","presence_penalty":3})", "presence_penalty"},
      {R"({"prompt":"x","repetition_penalty":0})", "repetition_penalty"},
      {R"({"prompt":"x","logprobs":100})", "logprobs"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
      {R"({"prompt":"x","echo":1})", "echo"},
      {R"({"prompt":"x","model":5})", "model"},
      {R"({"prompt":""})", "prompt"},
      {R"({"prompt":[]})", "prompt"},
      {R"({"prompt":[1,"a"]})", "prompt"},
      {R"({"prompt":[[]]})", "prompt"},
      {R"({"prompt":{"a":1}})", "prompt"},
      {R"({"prompt":[-3]})", "prompt"},
      {R"({"max_tokens":3})", "prompt"},
      {R"({"prompt":"x","stream_options":{"include_usage":"x"}})", "stream_options.include_usage"},
      {R"({"prompt":"x","logit_bias":[1]})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"abc":1}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"-4":1}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"12x":1}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"12":"high"}})", "logit_bias"},
      {R"({"prompt":"x","allowed_token_ids":[]})", "allowed_token_ids"},
      {R"({"prompt":"x","allowed_token_ids":[1,-1]})", "allowed_token_ids"},
      {R"({"prompt":"x","allowed_token_ids":5})", "allowed_token_ids"},
      {R"({"prompt":"x","min_tokens":-1})", "min_tokens"},
      {R"({"prompt":"x","bad_words":"dog"})", "bad_words"},
      {R"({"prompt":"x","bad_words":["dog",3]})", "bad_words"},
      {R"({"prompt":"x","bad_words":[["dog"]]})", "bad_words"},
      {R"({"prompt":"x","bad_words":{"dog":1}})", "bad_words"},
      {R"({"prompt":"x","min_tokens":"many"})", "min_tokens"},
      {R"([1,2])", ""},
      {R"({"prompt": "x", )", ""},
      {R"({"prompt":"x","temperature":NaN})", ""},
      {"", ""},
  };
  for (const auto& c : cases) {
    auto e = refusal(c.body);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
    if (*c.param) {
      EXPECT_NE(e->message.find(c.param), std::string::npos) << e->message;
    }
  }
}

TEST(OpenAIProtocol, TooManyStopStrings) {
  json j = {{"prompt", "x"}, {"stop", json::array()}};
  for (int i = 0; i < 10000; ++i) j["stop"].push_back(fmt::format("s{}", i));
  auto e = parse_completion(j.dump());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "stop");
}

TEST(OpenAIProtocol, InvalidUtf8AndDeepNestingAreRejected) {
  std::string bad = "{\"prompt\":\"a\xff\xfe\"}";
  auto e = parse_completion(bad);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 400);
  std::string deep = "{\"prompt\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  e = parse_completion(deep);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("nesting"), std::string::npos);
  EXPECT_EQ(json_depth(R"({"a":"[[[[","b":[{}]})", 100), 3);
}

// The body's nesting limit (72 levels) lets through schemas nested 32 deep under
// response_format, with an enum list at the bottom; deeper bodies are refused before any
// schema is read (the schema compiler's own bound, 300 nested values, is never reached).
TEST(OpenAIProtocol, BodyNestingLimitBoundsSchemas) {
  auto nested = [](int levels) {
    nlohmann::json s = {{"type", "array"}, {"items", {{"enum", {nlohmann::json::array({"x"})}}}}};
    for (int k = 0; k < levels; ++k) s = {{"type", "object"}, {"properties", {{"a", s}}}};
    return s;
  };
  for (bool chat : {false, true}) {
    for (int levels : {31, 32}) {
      nlohmann::json body = {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", nested(levels - 1)}}}}}};
      if (chat) body["messages"] = {{{"role", "user"}, {"content", "x"}}};
      else body["prompt"] = "x";
      ChatCompletionRequest cr;
      CompletionRequest r;
      auto e = chat ? parse_chat_request(body.dump(), Limits{}, &cr) : parse_completion_request(body.dump(), Limits{}, &r);
      EXPECT_FALSE(e) << levels << ": " << (e ? e->message : "");
    }
    nlohmann::json body = {{"prompt", "x"}, {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", nested(40)}}}}}};
    CompletionRequest r;
    auto e = parse_completion_request(body.dump(), Limits{}, &r);
    ASSERT_TRUE(e);
    EXPECT_NE(e->message.find("nesting deeper than 72 levels"), std::string::npos) << e->message;
  }
}

TEST(OpenAIProtocol, ChatRequest) {
  ChatCompletionRequest r;
  auto e = parse_chat_request(
      R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],
          "max_completion_tokens":9,"logprobs":true,"top_logprobs":2})",
      Limits{}, &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "hi");
  EXPECT_EQ(r.common.max_tokens, 9);
  EXPECT_EQ(r.common.sampling.logprobs, 2);
  for (const char* body : {R"({"messages":[]})", R"({"messages":"hi"})", R"({"messages":[{"content":"x"}]})",
                           R"({"model":"m"})", R"({"messages":[{"role":"user","content":5}]})"}) {
    e = parse_chat_request(body, Limits{}, &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, "messages") << body;
  }
  e = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Limits{}, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "top_logprobs");
}

// The ranges are SamplingParams::validate's, checked once, at admission: the protocol parses
// types only, and admission_error names the field as the body did.
TEST(OpenAIProtocol, RangesAreCheckedAtAdmissionUnderTheBodysNames) {
  auto refusal = [](const CommonFields& common, int64_t max_tokens) {
    sampling::SamplingParams s = common.sampling;
    s.max_tokens = static_cast<int32_t>(max_tokens);
    std::string field;
    Status st = s.validate(&field);
    EXPECT_FALSE(st.ok());
    return admission_error(st, field, common);
  };
  ChatCompletionRequest chat;
  auto e = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})", Limits{},
                              &chat);
  ASSERT_FALSE(e) << e->message;
  ApiError a = refusal(chat.common, *chat.common.max_tokens);
  EXPECT_EQ(a.http_status, 400);
  EXPECT_EQ(a.param, "max_completion_tokens");
  EXPECT_EQ(a.message.rfind("max_completion_tokens must be at least 1", 0), 0u) << a.message;
  e = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
                         Limits{}, &chat);
  ASSERT_FALSE(e) << e->message;
  a = refusal(chat.common, 16);
  EXPECT_EQ(a.param, "top_logprobs");
  EXPECT_EQ(a.message.rfind("top_logprobs must be between 0 and 20", 0), 0u) << a.message;
  // A count below zero is no count: refused as it is parsed.
  e = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-1})",
                         Limits{}, &chat);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "top_logprobs");
  // Completions name the engine's fields; the message is the engine's own.
  CompletionRequest r;
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","max_tokens":2,"min_tokens":3,"top_p":1.5})", &r));
  sampling::SamplingParams s = r.common.sampling;
  s.max_tokens = 2;
  std::string field;
  Status st = s.validate(&field);
  a = admission_error(st, field, r.common);
  EXPECT_EQ(a.param, "top_p");
  EXPECT_EQ(a.message, st.message());
  s.top_p = 1.0f;
  a = admission_error(s.validate(&field), field, r.common);
  EXPECT_EQ(a.param, "min_tokens");
}

TEST(OpenAIProtocol, LogitBiasAllowedTokenIdsAndMinTokens) {
  CompletionRequest r;
  auto e = parse_completion(R"({"prompt":"x","logit_bias":{"5":-100,"7":250.5,"9":-1e9,"11":0.25},
      "allowed_token_ids":[5,7,9],"min_tokens":4})",
                            &r);
  ASSERT_FALSE(e) << e->message;
  auto bias = r.common.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  // Clamped to [-100, 100] as vLLM does.
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {7, 100.0f}, {9, -100.0f}, {11, 0.25f}}));
  EXPECT_EQ(r.common.sampling.allowed_token_ids, (std::vector<int32_t>{5, 7, 9}));
  EXPECT_EQ(r.common.sampling.min_tokens, 4);
  ChatCompletionRequest chat;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"3":2},"min_tokens":2})",
                                  Limits{}, &chat));
  EXPECT_EQ(chat.common.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(chat.common.sampling.min_tokens, 2);
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","bad_words":["dog"," big cat",""]})", &r));
  EXPECT_EQ(r.common.bad_words, (std::vector<std::string>{"dog", " big cat", ""}));
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"bad_words":["dog"]})", Limits{},
                                  &chat));
  EXPECT_EQ(chat.common.bad_words, (std::vector<std::string>{"dog"}));
  auto bad = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"bad_words":[1]})", Limits{}, &chat);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->http_status, 400);
  EXPECT_EQ(bad->param, "bad_words");
}

// What troupe does not implement is refused by name, never silently ignored.
TEST(OpenAIProtocol, UnimplementedFieldsAreRefusedNotIgnored) {
  const BadCase completions[] = {
      {R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{}}})", "response_format"},
      {R"({"prompt":"x","response_format":{"type":"regex"}})", "response_format"},
      {R"({"prompt":"x","response_format":"json"})", "response_format"},
      {R"({"prompt":"x","guided_json":{"type":"object","not":{"type":"string"}}})", "guided_json"},  // not enforceable
      {R"({"prompt":"x","guided_json":{"type":"string","format":"idn-email"}})", "guided_json"},
      {R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"x"}}})", "response_format"},
      {R"({"prompt":"x","guided_choice":[]})", "guided_choice"},
      {R"({"prompt":"x","guided_choice":["a",""]})", "guided_choice"},
      {R"({"prompt":"x","guided_choice":["a",1]})", "guided_choice"},
      {R"({"prompt":"x","guided_choice":"a"})", "guided_choice"},
      {R"({"prompt":"x","guided_choice":["a"],"guided_json":{"type":"object"}})", "guided_choice"},
      {R"({"prompt":"x","suffix":" end"})", "suffix"},
      {R"({"prompt":"x","prompt_logprobs":1})", "prompt_logprobs"},
      {R"({"prompt":"x","best_of":3})", "best_of"},
      {R"({"prompt":"x","include_stop_str_in_output":"yes"})", "include_stop_str_in_output"},
  };
  for (const auto& c : completions) {
    auto e = parse_completion(c.body);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
  }
  EXPECT_NE(parse_completion(R"({"prompt":"x","best_of":3})")->message.find("not implemented"), std::string::npos);
  for (const char* ok : {R"({"prompt":"x","response_format":{"type":"text"}})", R"({"prompt":"x","suffix":""})",
                         R"({"prompt":"x","best_of":2,"n":2})", R"({"prompt":"x","prompt_logprobs":null})"})
    EXPECT_FALSE(parse_completion(ok)) << ok;
  CompletionRequest r;
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","include_stop_str_in_output":true})", &r));
  EXPECT_TRUE(r.common.sampling.include_stop_str_in_output);
  EXPECT_TRUE(r.common.sampling.structured_output.empty());
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","response_format":{"type":"json_object"}})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "json_object");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","response_format":{"type":"json_schema",
      "json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})",
                                &r));
  EXPECT_EQ(r.common.sampling.structured_output, "json_schema");
  EXPECT_EQ(json::parse(r.common.sampling.structured_spec)["properties"]["a"]["type"], "integer");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"json":{"type":"object"}}})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "json_schema");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"json_object":true}})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "json_object");
  for (const char* bad : {R"({"prompt":"x","structured_outputs":{"choice":["a"],"json_object":true}})",
                          R"({"prompt":"x","structured_outputs":{"regex":"a+","json":{"type":"integer"}}})",
                          R"({"prompt":"x","structured_outputs":{"json":{"not":{}}}})",
                          R"({"prompt":"x","structured_outputs":{"json":{"type":"object"},"json_object":true}})",
                          R"({"prompt":"x","structured_outputs":{"colour":1}})",
                          R"({"prompt":"x","guided_json":{"type":"object"},"structured_outputs":{"json_object":true}})"}) {
    auto e = parse_completion(bad);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->param, "structured_outputs") << bad;
  }
  // Every kind vLLM takes; a grammar's error gives its line and column.
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"regex":"a+"}})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "regex");
  EXPECT_EQ(r.common.sampling.structured_spec, "a+");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","guided_grammar":"root ::= \"a\" | \"b\""})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "grammar");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"json":{"type":"integer"}}})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "json_schema");  // any root, not just objects
  auto bad_grammar = parse_completion(R"({"prompt":"x","structured_outputs":{"grammar":"start: \"a\"\nfoo: (\"b\""}})");
  ASSERT_TRUE(bad_grammar);
  EXPECT_EQ(bad_grammar->param, "structured_outputs");
  EXPECT_NE(bad_grammar->message.find("line 2"), std::string::npos) << bad_grammar->message;
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","guided_json":{"type":"object"},"guided_whitespace_pattern":" ?",
                                   "guided_decoding_backend":"xgrammar"})", &r));
  EXPECT_EQ(r.common.sampling.structured_whitespace_pattern, " ?");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"json":{"type":"object"},
                                   "disable_any_whitespace":true}})", &r));
  EXPECT_TRUE(r.common.sampling.structured_compact);
  EXPECT_TRUE(r.common.sampling.validate().ok());
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","guided_choice":["yes","no"]})", &r));
  EXPECT_EQ(r.common.sampling.structured_output, "choice");
  EXPECT_EQ(r.common.sampling.choices, (std::vector<std::string>{"yes", "no"}));
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"choice":["a b","c"]}})", &r));
  EXPECT_EQ(r.common.sampling.choices, (std::vector<std::string>{"a b", "c"}));
  EXPECT_TRUE(r.common.sampling.validate().ok());
  // Properties keep their written order (the engine writes them so), whatever nlohmann sorts.
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","guided_json":{"type":"object","properties":{"zeta":{},"alpha":{}}}})", &r));
  EXPECT_LT(r.common.sampling.structured_spec.find("zeta"), r.common.sampling.structured_spec.find("alpha"));
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","structured_outputs":{"json":{"properties":{"zeta":{},"alpha":{}}},
                                   "disable_additional_properties":true}})", &r));
  EXPECT_LT(r.common.sampling.structured_spec.find("zeta"), r.common.sampling.structured_spec.find("alpha"));
  EXPECT_NE(r.common.sampling.structured_spec.find(R"("additionalProperties":false)"), std::string::npos);
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","guided_json":"{\"type\":\"object\"}"})", &r));
  EXPECT_EQ(r.common.sampling.structured_spec, R"({"type":"object"})");
  EXPECT_TRUE(r.common.sampling.validate().ok());

  ChatCompletionRequest chat;
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f"}}])";
  // tools without tool_choice: vLLM's "auto" (the server refuses it without a tool parser).
  EXPECT_FALSE(parse_chat_request("{" + msgs + "," + tools + "}", Limits{}, &chat));
  EXPECT_EQ(chat.tools.choice, ToolChoice::automatic);
  auto e = parse_chat_request("{" + msgs + R"(,"functions":[{"name":"f"}]})", Limits{}, &chat);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "functions");
  EXPECT_FALSE(parse_chat_request("{" + msgs + "," + tools + R"(,"tool_choice":"none"})", Limits{}, &chat));
  e = parse_chat_request("{" + msgs + R"(,"response_format":{"type":"json_schema","json_schema":{}}})", Limits{}, &chat);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "response_format");
  // continue_final_message needs add_generation_prompt false, as in vLLM.
  const std::string cont = R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"Hel"}],
      "continue_final_message":true)";
  e = parse_chat_request(cont + "}", Limits{}, &chat);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "continue_final_message");
  ASSERT_FALSE(parse_chat_request(cont + R"(,"add_generation_prompt":false})", Limits{}, &chat));
  EXPECT_TRUE(chat.continue_final_message);
}

// cache_salt reaches the request; vLLM's beam-search fields are refused unless at their defaults.
TEST(OpenAIProtocol, CacheSaltAndBeamSearchFields) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","cache_salt":"tenant-a"})", &r));
  EXPECT_EQ(r.common.cache_salt, "tenant-a");
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","cache_salt":null})", &r));
  EXPECT_EQ(r.common.cache_salt, "");
  ChatCompletionRequest chat;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"cache_salt":"s"})", Limits{}, &chat));
  EXPECT_EQ(chat.common.cache_salt, "s");
  for (const char* body : {R"({"prompt":"x","cache_salt":""})", R"({"prompt":"x","cache_salt":5})",
                           R"({"prompt":"x","cache_salt":["a"]})"}) {
    auto e = parse_completion(body);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->http_status, 400) << body;
    EXPECT_EQ(e->param, "cache_salt") << body;
  }
  auto e = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"cache_salt":""})", Limits{}, &chat);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "cache_salt");

  const BadCase refused[] = {
      {R"({"prompt":"x","use_beam_search":true})", "use_beam_search"},
      {R"({"prompt":"x","length_penalty":0.5})", "length_penalty"},
      {R"({"prompt":"x","logprob_token_ids":[1,2]})", "logprob_token_ids"},
      {R"({"prompt":"x","logprob_token_ids":[]})", "logprob_token_ids"},
  };
  for (const auto& c : refused) {
    e = parse_completion(c.body);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
    EXPECT_NE(e->message.find("not implemented"), std::string::npos) << e->message;
    std::string chat_body = c.body;
    chat_body.replace(chat_body.find(R"("prompt":"x")"), 12, R"("messages":[{"role":"user","content":"x"}])");
    e = parse_chat_request(chat_body, Limits{}, &chat);
    ASSERT_TRUE(e) << chat_body;
    EXPECT_EQ(e->param, c.param) << chat_body;
  }
  for (const char* body : {R"({"prompt":"x","use_beam_search":"yes"})", R"({"prompt":"x","length_penalty":"1"})"}) {
    e = parse_completion(body);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->message.find("not implemented"), std::string::npos) << e->message;
  }
  for (const char* ok : {R"({"prompt":"x","use_beam_search":false})", R"({"prompt":"x","length_penalty":1.0})",
                         R"({"prompt":"x","length_penalty":1})",
                         R"({"prompt":"x","use_beam_search":null,"logprob_token_ids":null})"})
    EXPECT_FALSE(parse_completion(ok)) << ok;
}

// vLLM's documented fields troupe lacks (runtime/frontend/openai/vllm_fields.cpp): a 400
// naming the field off vLLM's default, nothing at it (per endpoint: add_special_tokens'
// default is true on completions and embeddings, false on chat).
TEST(OpenAIProtocol, VllmFieldsOffTheirDefaultAreRefusedByName) {
  ChatCompletionRequest chat;
  EmbeddingRequest emb;
  ScoreRequest score;
  auto chat_body = [](const std::string& extra) {
    return R"({"messages":[{"role":"user","content":"x"}],)" + extra + "}";
  };
  for (const char* ok : {R"({"prompt":"x","skip_special_tokens":true,"add_special_tokens":true})",
                         R"({"prompt":"x","spaces_between_special_tokens":true,"prompt_embeds":null})",
                         R"({"prompt":"x","guided_decoding_backend":null,"kv_transfer_params":null})"})
    EXPECT_FALSE(parse_completion(ok)) << ok;
  for (const char* ok : {R"("add_special_tokens":false,"echo":false,"include_reasoning":true)",
                         R"("top_logprobs":0,"documents":null,"parallel_tool_calls":false)"})
    EXPECT_FALSE(parse_chat_request(chat_body(ok), Limits{}, &chat)) << ok;
  // include_reasoning is implemented (--reasoning-parser): false drops the reasoning.
  EXPECT_TRUE(chat.include_reasoning);
  ASSERT_FALSE(parse_chat_request(chat_body(R"("include_reasoning":false)"), Limits{}, &chat));
  EXPECT_FALSE(chat.include_reasoning);
  const BadCase completions[] = {
      {R"({"prompt":"x","skip_special_tokens":false})", "skip_special_tokens"},
      {R"({"prompt":"x","add_special_tokens":false})", "add_special_tokens"},
      {R"({"prompt":"x","prompt_embeds":"AAAA"})", "prompt_embeds"},
      {R"({"prompt":"x","logits_processors":["a.b"]})", "logits_processors"},
      {R"({"prompt":"x","kv_transfer_params":{}})", "kv_transfer_params"},
  };
  for (const auto& c : completions) {
    auto e = parse_completion(c.body);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->param, c.param);
    EXPECT_NE(e->message.find(std::string(c.param) + " is not implemented"), std::string::npos) << e->message;
  }
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("add_special_tokens":true)", "add_special_tokens"},
           {R"("echo":true)", "echo"},
           {R"("include_reasoning":"no")", "include_reasoning"},
           {R"("reasoning_effort":"low")", "reasoning_effort"},
           {R"("documents":[{"text":"a"}])", "documents"},
           {R"("mm_processor_kwargs":{})", "mm_processor_kwargs"},
           {R"("stream":true,"stream_options":{"continuous_usage_stats":true})", "stream_options.continuous_usage_stats"}}) {
    auto e = parse_chat_request(chat_body(extra), Limits{}, &chat);
    ASSERT_TRUE(e) << extra;
    EXPECT_EQ(e->param, param) << extra;
  }
  EXPECT_FALSE(parse_embedding_request(R"({"input":"x","add_special_tokens":true,"priority":0})", Limits{}, &emb));
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"input":"x","add_special_tokens":false})", "add_special_tokens"},
           {R"({"input":"x","priority":2})", "priority"},
           {R"({"input":"x","request_id":"r"})", "request_id"},
           {R"({"messages":[{"role":"user","content":"x"}]})", "messages"}}) {
    emb = EmbeddingRequest{};
    auto e = parse_embedding_request(body, Limits{}, &emb);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body;
  }
  auto e = parse_score_request(R"({"text_1":"a","text_2":"b","activation":true})", Limits{}, &score);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "activation");
}

// vLLM's request_id: the response's id after its prefix; a bounded, printable string.
TEST(OpenAIProtocol, RequestId) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","request_id":"abc-1"})", &r));
  EXPECT_EQ(r.common.request_id, "abc-1");
  const std::vector<std::string> bad_bodies = {
      R"({"prompt":"x","request_id":""})", R"({"prompt":"x","request_id":7})",
      R"({"prompt":"x","request_id":"a\u0001b"})",
      R"({"prompt":"x","request_id":")" + std::string(257, 'a') + R"("})"};
  for (const std::string& bad : bad_bodies) {
    auto e = parse_completion(bad);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->param, "request_id");
  }
}

// vLLM's return_token_ids and return_tokens_as_token_ids: booleans, on both endpoints;
// the ids render on the choice only when set.
TEST(OpenAIProtocol, ReturnTokenIdsFields) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion(R"({"prompt":"x"})", &r));
  EXPECT_FALSE(r.common.return_token_ids);
  EXPECT_FALSE(r.common.return_tokens_as_token_ids);
  ASSERT_FALSE(parse_completion(R"({"prompt":"x","return_token_ids":true,"return_tokens_as_token_ids":true})", &r));
  EXPECT_TRUE(r.common.return_token_ids);
  EXPECT_TRUE(r.common.return_tokens_as_token_ids);
  ChatCompletionRequest chat;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"return_token_ids":true})", Limits{},
                                  &chat));
  EXPECT_TRUE(chat.common.return_token_ids);
  for (const char* key : {"return_token_ids", "return_tokens_as_token_ids"}) {
    auto e = parse_completion(fmt::format(R"({{"prompt":"x","{}":1}})", key));
    ASSERT_TRUE(e) << key;
    EXPECT_EQ(e->param, key);
  }
  auto tt = [](int32_t id) { return fmt::format("t{}", id); };
  Choice c;
  c.text = "ab";
  json j = json::parse(render_completion("cmpl-1", 1, "m", {c}, {}, tt));
  EXPECT_FALSE(j["choices"][0].contains("token_ids"));
  EXPECT_FALSE(j["choices"][0].contains("prompt_token_ids"));
  c.prompt_token_ids = std::vector<int32_t>{1, 2};
  c.token_ids = std::vector<int32_t>{7, 8};
  for (const std::string& text :
       {render_completion("cmpl-1", 1, "m", {c}, {}, tt), render_completion_chunk("cmpl-1", 1, "m", c, tt)}) {
    j = json::parse(text);
    EXPECT_EQ(j["choices"][0]["prompt_token_ids"], json({1, 2})) << text;
    EXPECT_EQ(j["choices"][0]["token_ids"], json({7, 8})) << text;
  }
  // Chat (vLLM): the prompt's ids on the response, the output's on the choice.
  for (const std::string& text : {render_chat_completion("chatcmpl-1", 1, "m", {c}, {}, tt),
                                  render_chat_chunk("chatcmpl-1", 1, "m", c, true, tt)}) {
    j = json::parse(text);
    EXPECT_EQ(j["prompt_token_ids"], json({1, 2})) << text;
    EXPECT_FALSE(j["choices"][0].contains("prompt_token_ids")) << text;
    EXPECT_EQ(j["choices"][0]["token_ids"], json({7, 8})) << text;
  }
}

TEST(OpenAIProtocol, SeedPerChoice) {
  sampling::SamplingParams s;
  EXPECT_FALSE(choice_sampling(s, 3).seed.has_value());
  s.seed = 10;
  EXPECT_EQ(choice_sampling(s, 3).seed, 13u);
}

TEST(OpenAIErrors, EnvelopeAndStatusMapping) {
  json j = json::parse(render_error(invalid_param("temperature", "must be >= 0")));
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["type"], "BadRequestError");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_NE(j["error"]["message"].get<std::string>().find("temperature"), std::string::npos);
  j = json::parse(render_error(model_not_found("gpt-9")));
  EXPECT_EQ(j["error"]["message"], "The model `gpt-9` does not exist.");
  EXPECT_EQ(j["error"]["type"], "NotFoundError");
  EXPECT_EQ(j["error"]["code"], 404);
  EXPECT_EQ(from_status(resource_exhausted("queue full")).http_status, 503);
  EXPECT_EQ(from_status(invalid_argument("bad")).http_status, 400);
  EXPECT_EQ(from_status(not_found("x")).http_status, 404);
  EXPECT_EQ(from_status(internal_error("x")).http_status, 500);
  EXPECT_EQ(unauthorized().http_status, 401);
  EXPECT_EQ(payload_too_large(10).http_status, 413);
  EXPECT_TRUE(json::parse(render_error(unauthorized()))["error"]["param"].is_null());
}

TEST(OpenAIRender, CompletionShapes) {
  Choice c;
  c.text = "hello";
  c.finish_reason = "length";
  c.has_logprobs = true;
  c.logprobs = {{5, -0.5f, {{5, -0.5f}, {6, -1.5f}}}};
  auto tt = [](int32_t id) { return fmt::format("t{}", id); };
  json j = json::parse(render_completion("cmpl-1", 42, "m", {c}, {3, 1}, tt));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"][0], "t5");
  EXPECT_DOUBLE_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0]["t6"].get<double>(), -1.5);
  EXPECT_EQ(j["usage"]["total_tokens"], 4);

  j = json::parse(render_chat_completion("chatcmpl-1", 42, "m", {c}, {3, 1}, tt));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["token"], "t6");

  Choice d;
  d.text = "x";
  j = json::parse(render_chat_chunk("chatcmpl-1", 42, "m", d, true, tt));
  EXPECT_EQ(j["object"], "chat.completion.chunk");
  EXPECT_EQ(j["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  j = json::parse(render_usage_chunk("cmpl-1", 42, "m", false, {2, 5}));
  EXPECT_TRUE(j["choices"].empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");

  // Invalid UTF-8 in generated text is replaced, never thrown.
  Choice bad;
  bad.text = "a\xff";
  EXPECT_NO_THROW(render_completion("cmpl-1", 1, "m", {bad}, {}, tt));
  EXPECT_NE(make_request_id("cmpl"), make_request_id("cmpl"));
  EXPECT_EQ(make_request_id("cmpl").rfind("cmpl-", 0), 0u);
}

TEST(OpenAIRender, ModelsAndTokenize) {
  json j = json::parse(render_models("smol", "/tmp/x.gguf", 1, 2048));
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "smol");
  EXPECT_EQ(j["data"][0]["max_model_len"], 2048);
  j = json::parse(render_tokenize({1, 2}, 2048));
  EXPECT_EQ(j["count"], 2);
  EXPECT_EQ(json::parse(render_detokenize("hi"))["prompt"], "hi");
}

TEST(OpenAIProtocol, RerankRequest) {
  RerankRequest r;
  ASSERT_FALSE(parse_rerank_request(R"({"model":"m","query":"q","documents":["a",{"text":"b"}],"top_n":1,)"
                                    R"("return_documents":false,"truncate_prompt_tokens":8})",
                                    Limits{}, &r));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.query, "q");
  EXPECT_EQ(r.documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.top_n, 1);
  EXPECT_FALSE(r.return_documents);
  EXPECT_EQ(r.truncate_prompt_tokens, 8);
  RerankRequest d;
  ASSERT_FALSE(parse_rerank_request(R"({"query":"q","documents":["a"],"top_n":null})", Limits{}, &d));
  EXPECT_EQ(d.top_n, 0);  // every document
  EXPECT_TRUE(d.return_documents);

  const std::pair<const char*, const char*> bad[] = {
      {R"({"documents":["a"]})", "query"},
      {R"({"query":"","documents":["a"]})", "query"},
      {R"({"query":3,"documents":["a"]})", "query"},
      {R"({"query":"q"})", "documents"},
      {R"({"query":"q","documents":[]})", "documents"},
      {R"({"query":"q","documents":"a"})", "documents"},
      {R"({"query":"q","documents":["a",7]})", "documents"},
      {R"({"query":"q","documents":[{"title":"a"}]})", "documents"},
      {R"({"query":"q","documents":["a",""]})", "documents"},
      {R"({"query":"q","documents":["a"],"top_n":-1})", "top_n"},
      {R"({"query":"q","documents":["a"],"top_n":"2"})", "top_n"},
      {R"({"query":"q","documents":["a"],"return_documents":"yes"})", "return_documents"},
      {R"({"query":"q","documents":["a"],"truncate_prompt_tokens":0})", "truncate_prompt_tokens"},
  };
  for (const auto& [body, param] : bad) {
    RerankRequest x;
    auto e = parse_rerank_request(body, Limits{}, &x);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->http_status, 400) << body;
    EXPECT_EQ(e->param, param) << body;
    EXPECT_NE(e->message.find(param), std::string::npos) << body << ": " << e->message;
  }
  Limits small;
  small.max_prompts = 2;
  RerankRequest x;
  auto e = parse_rerank_request(R"({"query":"q","documents":["a","b","c"]})", small, &x);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "documents");
}

TEST(OpenAIRender, Rerank) {
  json j = json::parse(render_rerank("rerank-1", "m", {{1, 0.75}, {0, 0.25}}, {"a", "b"}, 9));
  EXPECT_EQ(j["id"], "rerank-1");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["usage"]["total_tokens"], 9);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["index"], 1);
  EXPECT_EQ(j["results"][0]["relevance_score"], 0.75);
  EXPECT_EQ(j["results"][0]["document"]["text"], "b");
  EXPECT_EQ(j["results"][1]["document"]["text"], "a");
  j = json::parse(render_rerank("rerank-2", "m", {{0, 0.5}}, {}, 3));
  EXPECT_FALSE(j["results"][0].contains("document"));
}

}  // namespace
}  // namespace troupe::openai
