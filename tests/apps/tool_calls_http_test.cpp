// Tool calling through a real `troupe serve` with SmolLM2 (TROUPE_TEST_MODEL): a named
// function and tool_choice "required" are enforced by structured outputs, so their
// tool_calls' arguments parse and hold to the tool's schema, whole and streamed; a
// call's result goes back through the chat template for a final answer; "auto"
// without a tool parser, and malformed tools, are 400s and the server keeps serving;
// with a parser, "auto" streams a call's arguments in fragments that join to the whole
// answer's arguments.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

const json kWeather = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "Get the current weather in a city"},
      {"parameters",
       {{"type", "object"},
        {"properties",
         {{"city", {{"type", "string"}, {"description", "The city, e.g. Paris"}}},
          {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
        {"required", {"city", "unit"}},
        {"additionalProperties", false}}}}}};
const json kTime = {
    {"type", "function"},
    {"function",
     {{"name", "get_time"},
      {"description", "Get the time in a timezone"},
      {"parameters",
       {{"type", "object"},
        {"properties", {{"utc_offset", {{"type", "integer"}}}}},
        {"required", {"utc_offset"}},
        {"additionalProperties", false}}}}}};

// The arguments hold to the tool's parameters: its required keys, no others, their types.
void expect_valid_arguments(const std::string& name, const std::string& arguments) {
  SCOPED_TRACE(name + " " + arguments);
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object());
  if (name == "get_weather") {
    EXPECT_EQ(args.size(), 2u);
    ASSERT_TRUE(args.contains("city") && args["city"].is_string());
    EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit");
  } else {
    ASSERT_EQ(name, "get_time");
    EXPECT_EQ(args.size(), 1u);
    EXPECT_TRUE(args.contains("utc_offset") && args["utc_offset"].is_number_integer());
  }
}

json weather_request(const json& tool_choice, bool stream) {
  return {{"messages", {{{"role", "user"}, {"content", "What is the weather like in Paris today?"}}}},
          {"tools", {kWeather, kTime}},
          {"tool_choice", tool_choice},
          {"max_tokens", 96},
          {"temperature", 0},
          {"stream", stream}};
}

struct Streamed {
  std::vector<json> chunks;
  std::map<int, json> calls;  // by index: {"id", "name", "arguments"}
  std::map<int, int> fragments;  // by index: deltas with a non-empty arguments piece
  std::string finish_reason;
};

Streamed stream_chat(const tests::ServeProcess& server, const json& body) {
  Streamed out;
  http::SseParser sse;
  auto s = http::request("127.0.0.1", server.port(), "POST", "/v1/chat/completions", body.dump(),
                         {{"Content-Type", "application/json"}},
                         [&](std::string_view piece) {
                           sse.feed(piece, [&](std::string_view d) {
                             if (d == "[DONE]") return;
                             json chunk = json::parse(d, nullptr, false);
                             if (!chunk.is_object() || !chunk.contains("choices") || chunk["choices"].empty()) return;
                             out.chunks.push_back(chunk);
                             const json& choice = chunk["choices"][0];
                             if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"];
                             for (const auto& call : choice["delta"].value("tool_calls", json::array())) {
                               json& c = out.calls[call["index"].get<int>()];
                               if (call.contains("id")) {
                                 EXPECT_FALSE(c.contains("id")) << "a second first delta: " << d;
                                 EXPECT_EQ(call["type"], "function");
                                 c["id"] = call["id"];
                                 c["name"] = call["function"]["name"];
                                 c["arguments"] = "";
                               }
                               EXPECT_TRUE(c.contains("id")) << "arguments before the call's first delta: " << d;
                               const std::string piece = call["function"].value("arguments", "");
                               c["arguments"] = c.value("arguments", "") + piece;
                               out.fragments[call["index"].get<int>()] += !piece.empty();
                             }
                           });
                           return true;
                         },
                         std::chrono::seconds(120));
  EXPECT_TRUE(s.ok());
  return out;
}

class ToolCallsHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared_.start({"--max-model-len", "1024"}); }
  static void TearDownTestSuite() { shared_.stop(); }
  void SetUp() override { TROUPE_REQUIRE_SERVER(shared_); }
  static tests::SharedModelServer shared_;
};
tests::SharedModelServer ToolCallsHttp::shared_;

TEST_F(ToolCallsHttp, NamedFunctionWholeAndStreamed) {
  const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  json r = tests::post_json(*shared_, "/v1/chat/completions", weather_request(named, false));
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop") << r.dump();  // vLLM's, for a named function
  EXPECT_EQ(choice["message"]["content"], "");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.dump();
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  expect_valid_arguments("get_weather", call["function"]["arguments"]);

  Streamed s = stream_chat(*shared_, weather_request(named, true));
  ASSERT_FALSE(s.chunks.empty());
  EXPECT_EQ(s.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(s.finish_reason, "tool_calls");  // vLLM's, once a call was streamed
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["name"], "get_weather");
  EXPECT_EQ(s.calls[0]["arguments"], call["function"]["arguments"]);  // greedy: the same text
}

TEST_F(ToolCallsHttp, RequiredWholeAndStreamed) {
  json r = tests::post_json(*shared_, "/v1/chat/completions", weather_request("required", false));
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop") << r.dump();  // vLLM's, without streaming
  EXPECT_EQ(choice["message"]["content"], "");
  const json calls = choice["message"]["tool_calls"];
  ASSERT_GE(calls.size(), 1u) << r.dump();
  for (const auto& call : calls) {
    EXPECT_EQ(call["type"], "function");
    expect_valid_arguments(call["function"]["name"], call["function"]["arguments"]);
  }

  Streamed s = stream_chat(*shared_, weather_request("required", true));
  EXPECT_EQ(s.finish_reason, "tool_calls");
  ASSERT_EQ(s.calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(s.calls[static_cast<int>(i)]["name"], calls[i]["function"]["name"]);
    expect_valid_arguments(s.calls[static_cast<int>(i)]["name"], s.calls[static_cast<int>(i)]["arguments"]);
    EXPECT_EQ(json::parse(s.calls[static_cast<int>(i)]["arguments"].get<std::string>()),
              json::parse(calls[i]["function"]["arguments"].get<std::string>()));
  }
}

TEST_F(ToolCallsHttp, ARoundTripEndsInAnAnswer) {
  const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  json r = tests::post_json(*shared_, "/v1/chat/completions", weather_request(named, false));
  const json call = r["choices"][0]["message"]["tool_calls"][0];
  json messages = {{{"role", "user"}, {"content", "What is the weather like in Paris today?"}},
                   {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
                   {{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "{\"temperature\": 21, \"sky\": \"sunny\"}"}}};
  json answer = tests::post_json(*shared_, "/v1/chat/completions",
                                 {{"messages", messages}, {"tools", {kWeather, kTime}}, {"tool_choice", "none"},
                                  {"max_tokens", 48}, {"temperature", 0}});
  ASSERT_TRUE(answer.is_object());
  EXPECT_FALSE(answer["choices"][0]["message"]["content"].get<std::string>().empty()) << answer.dump();
  EXPECT_FALSE(answer["choices"][0]["message"].contains("tool_calls"));
  // The call and its result reach the prompt (vLLM's /tokenize renders messages the same way).
  json tokens = tests::post_json(*shared_, "/tokenize", {{"messages", messages}, {"add_generation_prompt", true}});
  ASSERT_TRUE(tokens.is_object());
  json prompt = tests::post_json(*shared_, "/detokenize", {{"tokens", tokens["tokens"]}});
  const std::string text = prompt.value("prompt", "");
  // SmolLM2's template writes the role and the content (detokenize drops <|im_start|>).
  EXPECT_NE(text.find("\ntool\n{\"temperature\": 21, \"sky\": \"sunny\"}"), std::string::npos) << text;
}

TEST_F(ToolCallsHttp, AutoWithoutAParserAndBadToolsAre400s) {
  json r = tests::post_json(*shared_, "/v1/chat/completions", weather_request("auto", false), 400);
  EXPECT_NE(r.dump().find("--enable-auto-tool-choice"), std::string::npos) << r.dump();
  json no_choice = weather_request("auto", false);
  no_choice.erase("tool_choice");  // vLLM's default with tools is "auto"
  tests::post_json(*shared_, "/v1/chat/completions", no_choice, 400);
  json bad = weather_request("required", false);
  bad["tools"][0]["function"]["name"] = "get weather";
  r = tests::post_json(*shared_, "/v1/chat/completions", bad, 400);
  EXPECT_EQ(r["error"]["param"], "tools") << r.dump();
  bad = weather_request({{"type", "function"}, {"function", {{"name", "get_date"}}}}, false);
  r = tests::post_json(*shared_, "/v1/chat/completions", bad, 400);
  EXPECT_EQ(r["error"]["param"], "tool_choice") << r.dump();
  // Still serving.
  r = tests::post_json(*shared_, "/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}});
  EXPECT_EQ(r["object"], "chat.completion");
}

// --enable-auto-tool-choice needs a registered --tool-call-parser: a start-up error naming them.
TEST(ToolCallsCli, AnUnknownParserStopsStartUp) {
  auto r = troupe::testing::run_troupe("serve --enable-auto-tool-choice --tool-call-parser nope --port 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("hermes, llama3_json, mistral, pythonic"), std::string::npos) << r.err;
  r = troupe::testing::run_troupe("serve --enable-auto-tool-choice --port 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--tool-call-parser"), std::string::npos) << r.err;
}

// tool_choice "auto" with the hermes parser: the model's text goes through the parser. SmolLM2's
// template has no tools, so the test checks the answer's form (content, or tool_calls with
// finish_reason "tool_calls"), whole and streamed alike.
TEST(ToolCallsHttp2, AutoWithHermesAnswersWholeAndStreamed) {
  const char* model = std::getenv("TROUPE_TEST_MODEL");
  if (!model || !*model) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  tests::ServeProcess server({"--max-model-len", "1024", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"},
                             model);
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  json r = tests::post_json(server, "/v1/chat/completions", weather_request("auto", false));
  const json& message = r["choices"][0]["message"];
  if (message.contains("tool_calls")) {
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  } else {
    EXPECT_FALSE(message["content"].get<std::string>().empty()) << r.dump();
    Streamed s = stream_chat(server, weather_request("auto", true));
    std::string content;
    for (const auto& chunk : s.chunks) content += chunk["choices"][0]["delta"].value("content", "");
    EXPECT_EQ(content, message["content"]);  // greedy: the same text
    EXPECT_TRUE(s.calls.empty());
  }
}

// tool_choice "auto" with the llama3_json and pythonic parsers, the model held to one call's
// text by a structured-outputs choice: streamed, the call's id and name come first, then its
// arguments in several fragments (vLLM's way) that join to the whole answer's arguments.
TEST(ToolCallsHttp2, AutoStreamsArgumentsInFragments) {
  const char* model = std::getenv("TROUPE_TEST_MODEL");
  if (!model || !*model) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  const std::pair<const char*, const char*> cases[] = {
      {"llama3_json", R"({"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}})"},
      {"pythonic", R"([get_weather(city='Paris', unit='celsius')])"},
  };
  for (const auto& [parser, text] : cases) {
    SCOPED_TRACE(parser);
    tests::ServeProcess server({"--max-model-len", "1024", "--enable-auto-tool-choice", "--tool-call-parser", parser},
                               model);
    ASSERT_TRUE(server.wait_healthy()) << server.log();
    json body = weather_request("auto", false);
    body["structured_outputs"] = {{"choice", json::array({text})}};
    const json r = tests::post_json(server, "/v1/chat/completions", body);
    const json& calls = r["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.dump();
    EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city": "Paris", "unit": "celsius"})");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
    body["stream"] = true;
    const Streamed s = stream_chat(server, body);
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls.at(0)["name"], "get_weather");
    EXPECT_EQ(s.calls.at(0)["arguments"], calls[0]["function"]["arguments"]);
    EXPECT_GE(s.fragments.at(0), 3) << "the arguments in pieces";
    EXPECT_EQ(s.finish_reason, "tool_calls");
  }
}

}  // namespace
}  // namespace troupe
