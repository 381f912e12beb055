// POST /v1/responses through a real `troupe serve` with SmolLM2 (TROUPE_TEST_MODEL):
// text answers equal the chat answer of the same conversation (greedy), streamed as
// OpenAI's event sequence; function tools (named and required) give function_call
// items whose arguments hold to the schema; a call's output fed back gives an answer;
// what is not implemented is a 400 naming the field and the server keeps serving.
// With --reasoning-parser the reasoning is a reasoning item.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

const json kWeather = {{"type", "function"},
                       {"name", "get_weather"},
                       {"description", "Get the current weather in a city"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties",
                          {{"city", {{"type", "string"}}},
                           {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                         {"required", {"city", "unit"}},
                         {"additionalProperties", false}}}};

void expect_valid_weather(const std::string& arguments) {
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << arguments;
  EXPECT_EQ(args.size(), 2u) << arguments;
  EXPECT_TRUE(args.contains("city") && args["city"].is_string()) << arguments;
  EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << arguments;
}

// Every event of a streamed response: "event: TYPE" / "data: JSON" pairs.
std::vector<json> stream_events(const tests::ServeProcess& server, json body) {
  body["stream"] = true;
  std::string all;
  auto s = http::request("127.0.0.1", server.port(), "POST", "/v1/responses", body.dump(),
                         {{"Content-Type", "application/json"}},
                         [&](std::string_view piece) {
                           all.append(piece);
                           return true;
                         },
                         std::chrono::seconds(120));
  EXPECT_TRUE(s.ok());
  if (s.ok()) {
    EXPECT_EQ(s->status, 200);
  }
  std::vector<json> events;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find("\n\n", pos);
    if (end == std::string::npos) end = all.size();
    const std::string block = all.substr(pos, end - pos);
    pos = end + 2;
    if (block.rfind(":", 0) == 0) continue;  // keep-alive comment
    const size_t nl = block.find('\n');
    if (nl == std::string::npos) {
      ADD_FAILURE() << "not an event: " << block;
      continue;
    }
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    json e = json::parse(block.substr(nl + 7), nullptr, false);
    EXPECT_EQ(e.value("type", ""), block.substr(7, nl - 7)) << block;
    events.push_back(e);
  }
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], static_cast<int>(i));
  return events;
}

std::vector<json> of_type(const std::vector<json>& events, const std::string& type) {
  std::vector<json> out;
  for (const auto& e : events)
    if (e["type"] == type) out.push_back(e);
  return out;
}

std::string output_text(const json& response) {
  std::string text;
  for (const auto& item : response["output"])
    if (item["type"] == "message")
      for (const auto& part : item["content"])
        if (part["type"] == "output_text") text += part["text"].get<std::string>();
  return text;
}

class ResponsesHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared_.start({"--max-model-len", "1024"}); }
  static void TearDownTestSuite() { shared_.stop(); }
  void SetUp() override { TROUPE_REQUIRE_SERVER(shared_); }
  static tests::SharedModelServer shared_;
};
tests::SharedModelServer ResponsesHttp::shared_;

TEST_F(ResponsesHttp, TextAnswerEqualsChatsWholeAndStreamed) {
  const json body = {{"input", "What is the capital of France?"}, {"instructions", "Answer in one sentence."},
                     {"max_output_tokens", 20}, {"temperature", 0}};
  json chat = tests::post_json(*shared_, "/v1/chat/completions",
                               {{"messages", {{{"role", "system"}, {"content", "Answer in one sentence."}},
                                              {{"role", "user"}, {"content", "What is the capital of France?"}}}},
                                {"max_tokens", 20},
                                {"temperature", 0}});
  const std::string want = chat["choices"][0]["message"]["content"];
  ASSERT_FALSE(want.empty());
  json r = tests::post_json(*shared_, "/v1/responses", body);
  EXPECT_EQ(r["object"], "response") << r.dump();
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(output_text(r), want) << r.dump();
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["role"], "assistant");
  EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(r["usage"]["total_tokens"], chat["usage"]["total_tokens"]);
  EXPECT_EQ(r["instructions"], "Answer in one sentence.");
  EXPECT_EQ(r["max_output_tokens"], 20);
  if (chat["choices"][0]["finish_reason"] == "length") {
    EXPECT_EQ(r["status"], "incomplete");
    EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  } else {
    EXPECT_EQ(r["status"], "completed");
  }

  auto events = stream_events(*shared_, body);
  ASSERT_GE(events.size(), 8u);
  EXPECT_EQ(events[0]["type"], "response.created");
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  EXPECT_EQ(events[2]["type"], "response.output_item.added");
  EXPECT_EQ(events[3]["type"], "response.content_part.added");
  std::string deltas;
  for (const auto& e : of_type(events, "response.output_text.delta")) deltas += e["delta"].get<std::string>();
  EXPECT_EQ(deltas, want);
  auto done = of_type(events, "response.output_text.done");
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]["text"], want);
  const json& last = events.back();
  EXPECT_EQ(last["type"], r["status"] == "completed" ? "response.completed" : "response.incomplete");
  EXPECT_EQ(output_text(last["response"]), want);
  EXPECT_EQ(last["response"]["usage"]["output_tokens"], r["usage"]["output_tokens"]);
}

TEST_F(ResponsesHttp, NamedAndRequiredFunctionCallsWholeAndStreamed) {
  for (const json& choice : {json{{"type", "function"}, {"name", "get_weather"}}, json("required")}) {
    SCOPED_TRACE(choice.dump());
    const json body = {{"input", "What is the weather like in Paris today?"}, {"tools", {kWeather}},
                       {"tool_choice", choice}, {"max_output_tokens", 96}, {"temperature", 0}};
    json r = tests::post_json(*shared_, "/v1/responses", body);
    std::vector<json> calls;
    for (const auto& item : r["output"])
      if (item["type"] == "function_call") calls.push_back(item);
    ASSERT_GE(calls.size(), 1u) << r.dump();
    EXPECT_EQ(calls[0]["name"], "get_weather");
    EXPECT_EQ(calls[0]["id"].get<std::string>().rfind("fc_", 0), 0u);
    EXPECT_FALSE(calls[0]["call_id"].get<std::string>().empty());
    expect_valid_weather(calls[0]["arguments"]);

    auto events = stream_events(*shared_, body);
    auto added = of_type(events, "response.output_item.added");
    ASSERT_GE(added.size(), 1u);
    EXPECT_EQ(added[0]["item"]["type"], "function_call");
    EXPECT_EQ(added[0]["item"]["name"], "get_weather");
    std::string arguments;
    for (const auto& e : of_type(events, "response.function_call_arguments.delta"))
      if (e["output_index"] == 0) arguments += e["delta"].get<std::string>();
    auto args_done = of_type(events, "response.function_call_arguments.done");
    ASSERT_GE(args_done.size(), 1u);
    EXPECT_EQ(args_done[0]["arguments"], arguments);
    EXPECT_EQ(json::parse(arguments, nullptr, false), json::parse(calls[0]["arguments"].get<std::string>()));
    EXPECT_EQ(events.back()["response"]["output"][0]["arguments"], arguments);
  }
}

TEST_F(ResponsesHttp, FunctionCallOutputRoundTrip) {
  const json named = {{"type", "function"}, {"name", "get_weather"}};
  json first = tests::post_json(*shared_, "/v1/responses",
                                {{"input", "What is the weather like in Paris today?"}, {"tools", {kWeather}},
                                 {"tool_choice", named}, {"max_output_tokens", 96}, {"temperature", 0}});
  const json call = first["output"][0];
  ASSERT_EQ(call["type"], "function_call") << first.dump();
  json input = json::array({{{"role", "user"}, {"content", "What is the weather like in Paris today?"}}, call,
                            {{"type", "function_call_output"}, {"call_id", call["call_id"]},
                             {"output", "{\"temperature\": 21, \"sky\": \"sunny\"}"}}});
  json answer = tests::post_json(*shared_, "/v1/responses",
                                 {{"input", input}, {"tools", {kWeather}}, {"tool_choice", "none"},
                                  {"max_output_tokens", 32}, {"temperature", 0}});
  EXPECT_FALSE(output_text(answer).empty()) << answer.dump();
  for (const auto& item : answer["output"]) EXPECT_NE(item["type"], "function_call");
}

TEST_F(ResponsesHttp, UnimplementedFieldsAre400sAndTheServerKeepsServing) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"input", "x"}, {"store", true}}, "store"},
      {{{"input", "x"}, {"previous_response_id", "resp_123"}}, "previous_response_id"},
      {{{"input", "x"}, {"background", true}}, "background"},
      {{{"input", "x"}, {"tools", {{{"type", "web_search_preview"}}}}}, "tools"},
      {{{"input", "x"}, {"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"instructions", "no input"}}, "input"},
  };
  for (const auto& [body, param] : cases) {
    json r = tests::post_json(*shared_, "/v1/responses", body, 400);
    EXPECT_EQ(r["error"]["param"], param) << r.dump();
  }
  // vLLM answers "auto" with tools only with a tool parser.
  json r = tests::post_json(*shared_, "/v1/responses", {{"input", "x"}, {"tools", {kWeather}}}, 400);
  EXPECT_EQ(r["error"]["param"], "tool_choice") << r.dump();
  json ok = tests::post_json(*shared_, "/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 4}, {"store", false}});
  EXPECT_EQ(ok["object"], "response") << ok.dump();
}

class ResponsesReasoningHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared_.start({"--max-model-len", "1024", "--reasoning-parser", "deepseek_r1"}); }
  static void TearDownTestSuite() { shared_.stop(); }
  void SetUp() override { TROUPE_REQUIRE_SERVER(shared_); }
  static tests::SharedModelServer shared_;
};
tests::SharedModelServer ResponsesReasoningHttp::shared_;

TEST_F(ResponsesReasoningHttp, ReasoningIsAReasoningItem) {
  // SmolLM2 writes no </think>: under deepseek_r1 its whole answer is reasoning.
  const std::string question = "What is the capital of France?";
  json chat = tests::post_json(*shared_, "/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", question}}}},
                                {"max_tokens", 24},
                                {"temperature", 0}});
  const json& message = chat["choices"][0]["message"];
  ASSERT_TRUE(message["reasoning_content"].is_string()) << chat.dump();
  ASSERT_FALSE(message["reasoning_content"].get<std::string>().empty()) << chat.dump();
  const json body = {{"input", question}, {"max_output_tokens", 24}, {"temperature", 0}};
  json r = tests::post_json(*shared_, "/v1/responses", body);
  ASSERT_GE(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], message["reasoning_content"]);
  EXPECT_EQ(output_text(r), message["content"].is_string() ? message["content"].get<std::string>() : "");
  EXPECT_GT(r["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 0);
  EXPECT_LE(r["usage"]["output_tokens_details"]["reasoning_tokens"], r["usage"]["output_tokens"]);

  auto events = stream_events(*shared_, body);
  std::string reasoning;
  for (const auto& e : of_type(events, "response.reasoning_text.delta")) reasoning += e["delta"].get<std::string>();
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["response"]["output"][0]["type"], "reasoning");
  EXPECT_EQ(events.back()["response"]["output"][0]["content"][0]["text"], message["reasoning_content"]);
  EXPECT_EQ(output_text(events.back()["response"]), output_text(r));
}

}  // namespace
}  // namespace troupe
