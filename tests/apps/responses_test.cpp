// /v1/responses without a server: the request as the chat request it becomes (input
// items, instructions, tools, tool_choice, max_output_tokens), the fields that are
// refused by name, the output items of an answer, and the event stream's order.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "runtime/frontend/openai/responses.hpp"
#include "runtime/frontend/openai/responses_stream.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;

ResponsesRequest parse_ok(const json& body) {
  ResponsesRequest r;
  auto err = parse_responses_request(body.dump(), Limits{}, &r);
  EXPECT_FALSE(err) << body.dump() << " -> " << (err ? err->message : "");
  return r;
}

ApiError parse_error(const json& body) {
  ResponsesRequest r;
  auto err = parse_responses_request(body.dump(), Limits{}, &r);
  EXPECT_TRUE(err) << body.dump();
  return err.value_or(ApiError{});
}

// A body that parses but whose values admission refuses (SamplingParams::validate, run
// once there), answered under the Responses API's names (openai::admission_error).
ApiError admission_refusal(const json& body) {
  ResponsesRequest r = parse_ok(body);
  sampling::SamplingParams s = r.chat.common.sampling;
  if (r.chat.common.max_tokens) s.max_tokens = static_cast<int32_t>(*r.chat.common.max_tokens);
  std::string field;
  Status st = s.validate(&field);
  EXPECT_FALSE(st.ok()) << body.dump();
  return admission_error(st, field, r.chat.common);
}

const json kWeather = {{"type", "function"},
                       {"name", "get_weather"},
                       {"description", "Weather in a city"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}}}}},
                         {"required", {"city"}}}}};

TEST(Responses, StringInputAndInstructions) {
  auto r = parse_ok({{"input", "Hi there"}, {"instructions", "Be brief."}, {"max_output_tokens", 16},
                     {"temperature", 0.5}, {"top_p", 0.9}});
  const auto& m = r.chat.chat.messages;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "Be brief.");
  EXPECT_EQ(m[1]["role"], "user");
  EXPECT_EQ(m[1]["content"], "Hi there");
  EXPECT_EQ(r.chat.common.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.chat.common.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.chat.common.sampling.top_p, 0.9f);
  EXPECT_FALSE(r.chat.common.stream);
  EXPECT_EQ(r.chat.tools.choice, ToolChoice::none);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 16);
  EXPECT_EQ(r.echo["tool_choice"], "auto");
}

TEST(Responses, ItemsBecomeMessagesWithToolCallsAndResults) {
  json input = json::array(
      {{{"role", "developer"}, {"content", "Use tools."}},
       {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Weather in "}},
                                                            {{"type", "input_text"}, {"text", "Paris?"}}}}},
       {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()}},
       {{"type", "function_call"}, {"call_id", "call_1"}, {"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}},
       {{"type", "function_call"}, {"call_id", "call_2"}, {"name", "get_weather"}, {"arguments", "{\"city\":\"Lyon\"}"}},
       {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "21C"}},
       {{"type", "function_call_output"}, {"call_id", "call_2"}, {"output", "19C"}}});
  auto r = parse_ok({{"input", input}, {"tools", {kWeather}}, {"tool_choice", "none"}});
  const auto& m = r.chat.chat.messages;
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "Weather in Paris?");
  EXPECT_EQ(m[2]["role"], "assistant");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);  // consecutive calls in one message
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["arguments"].dump(), "{\"city\":\"Lyon\"}");  // objects, as vLLM
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
  EXPECT_EQ(m[3]["content"], "21C");
  EXPECT_EQ(m[4]["content"], "19C");
  EXPECT_EQ(r.chat.tools.names, std::vector<std::string>{"get_weather"});
}

TEST(Responses, ToolChoicesMapToChats) {
  auto r = parse_ok({{"input", "x"}, {"tools", {kWeather}}, {"tool_choice", "required"}});
  EXPECT_EQ(r.chat.tools.choice, ToolChoice::required);
  EXPECT_EQ(r.chat.common.sampling.structured_output, "json_schema");
  r = parse_ok({{"input", "x"}, {"tools", {kWeather}}, {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}});
  EXPECT_EQ(r.chat.tools.choice, ToolChoice::named);
  EXPECT_EQ(r.chat.tools.named, "get_weather");
  r = parse_ok({{"input", "x"}, {"tools", {kWeather}}});
  EXPECT_EQ(r.chat.tools.choice, ToolChoice::automatic);  // the default with tools
  r = parse_ok({{"input", "x"}, {"tool_choice", "auto"}});  // no tools: nothing to choose
  EXPECT_EQ(r.chat.tools.choice, ToolChoice::none);
  r = parse_ok({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "o"},
                                                       {"schema", {{"type", "object"}}}}}}}});
  EXPECT_EQ(r.chat.common.sampling.structured_output, "json_schema");
}

TEST(Responses, UnimplementedFieldsAre400sNamingThem) {
  struct Case {
    json body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"input", "x"}, {"store", true}}, "store"},
      {{{"input", "x"}, {"previous_response_id", "resp_1"}}, "previous_response_id"},
      {{{"input", "x"}, {"background", true}}, "background"},
      {{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}, "tools"},
      {{{"input", "x"}, {"tool_choice", {{"type", "web_search"}}}}, "tool_choice"},
      {{{"input", "x"}, {"include", {"reasoning.encrypted_content"}}}, "include"},
      {{{"input", "x"}, {"reasoning", {{"effort", "low"}}}}, "reasoning"},
      {{{"input", "x"}, {"truncation", "auto"}}, "truncation"},
      {{{"input", "x"}, {"conversation", "conv_1"}}, "conversation"},
      {{{"input", "x"}, {"max_tool_calls", 2}}, "max_tool_calls"},
      {{{"input", "x"}, {"top_logprobs", 2}}, "top_logprobs"},
      {{{"input", json::array({{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}}}}})}},
       "input"},
      {{{"input", json::array({{{"type", "item_reference"}, {"id", "x"}}})}}, "input"},
  };
  for (const auto& c : cases) {
    ApiError e = parse_error(c.body);
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param, c.param) << c.body.dump();
    EXPECT_NE(e.message.find("not implemented"), std::string::npos) << e.message;
  }
  // At their defaults they are accepted.
  parse_ok({{"input", "x"}, {"store", false}, {"background", false}, {"truncation", "disabled"},
            {"include", json::array()}, {"previous_response_id", nullptr}});
}

TEST(Responses, BadFieldsAre400sNamingThem) {
  EXPECT_EQ(parse_error({{"instructions", "x"}}).param, "input");
  EXPECT_EQ(parse_error({{"input", 3}}).param, "input");
  EXPECT_EQ(parse_error({{"input", json::array()}}).param, "input");
  EXPECT_EQ(parse_error({{"input", json::array({{{"role", "robot"}, {"content", "x"}}})}}).param, "input");
  EXPECT_EQ(admission_refusal({{"input", "x"}, {"max_output_tokens", -3}}).param, "max_output_tokens");
  EXPECT_EQ(admission_refusal({{"input", "x"}, {"max_output_tokens", -3}}).message.rfind("max_output_tokens must", 0),
            0u);
  EXPECT_EQ(parse_error({{"input", "x"}, {"max_output_tokens", "many"}}).param, "max_output_tokens");
  EXPECT_EQ(admission_refusal({{"input", "x"}, {"temperature", -1}}).param, "temperature");
  EXPECT_EQ(parse_error({{"input", "x"}, {"instructions", 5}}).param, "instructions");
  json bad_tool = kWeather;
  bad_tool["name"] = "get weather";
  EXPECT_EQ(parse_error({{"input", "x"}, {"tools", {bad_tool}}}).param, "tools");
  EXPECT_EQ(parse_error({{"input", "x"}, {"tools", {kWeather}},
                         {"tool_choice", {{"type", "function"}, {"name", "nope"}}}})
                .param,
            "tool_choice");
}

TEST(Responses, OutputItems) {
  Choice answer;
  answer.text = "It is sunny.";
  json items = response_output_items(answer);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["type"], "message");
  EXPECT_EQ(items[0]["role"], "assistant");
  EXPECT_EQ(items[0]["content"][0]["type"], "output_text");
  EXPECT_EQ(items[0]["content"][0]["text"], "It is sunny.");
  EXPECT_EQ(items[0]["id"].get<std::string>().rfind("msg_", 0), 0u);

  answer.has_reasoning = true;
  answer.reasoning = "Look outside.";
  answer.text.clear();
  answer.tool_calls = {{"call_1", "get_weather", "{\"city\": \"Paris\"}"}};
  items = response_output_items(answer);
  ASSERT_EQ(items.size(), 2u) << items.dump();
  EXPECT_EQ(items[0]["type"], "reasoning");
  EXPECT_EQ(items[0]["content"][0]["text"], "Look outside.");
  EXPECT_EQ(items[1]["type"], "function_call");
  EXPECT_EQ(items[1]["call_id"], "call_1");
  EXPECT_EQ(items[1]["name"], "get_weather");
  EXPECT_EQ(items[1]["arguments"], "{\"city\": \"Paris\"}");

  json r = response_object("resp_1", 7, "m", {{"temperature", 1.0}}, response_status("length"), items,
                           ResponseUsage{5, 3, 1});
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["usage"]["total_tokens"], 8);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 1);
  EXPECT_EQ(response_status("stop"), "completed");
}

// The events of a stream, parsed: "event: T\ndata: {...}".
std::vector<json> events_of(const std::string& sse) {
  std::vector<json> out;
  std::istringstream in(sse);
  std::string line, type;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) type = line.substr(7);
    if (line.rfind("data: ", 0) == 0) {
      json e = json::parse(line.substr(6));
      EXPECT_EQ(e["type"], type);
      out.push_back(e);
    }
  }
  return out;
}

TEST(Responses, EventStreamOrder) {
  ResponsesEventStream s("resp_1", 7, "m", {{"tools", json::array()}});
  std::string sse = s.start();
  sse += s.piece("Think", "", {});
  sse += s.piece("ing.", "", {});
  sse += s.piece("", "Hello", {});
  sse += s.piece("", " world", {});
  ToolCallDelta first{0, std::string("call_1"), std::string("f"), "{\"a\":"};
  ToolCallDelta rest{0, std::nullopt, std::nullopt, " 1}"};
  sse += s.piece("", "", {first});
  sse += s.piece("", "", {rest});
  sse += s.finish("completed", ResponseUsage{4, 6, 2});
  auto ev = events_of(sse);
  std::vector<std::string> types;
  for (size_t i = 0; i < ev.size(); ++i) {
    types.push_back(ev[i]["type"]);
    EXPECT_EQ(ev[i]["sequence_number"], static_cast<int>(i));
  }
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done", "response.completed"};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(ev[0]["response"]["status"], "in_progress");
  const json& done = ev.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Thinking.");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello world");
  EXPECT_EQ(done["output"][2]["arguments"], "{\"a\": 1}");
  EXPECT_EQ(done["output"][2]["call_id"], "call_1");
  EXPECT_EQ(done["usage"]["output_tokens"], 6);
  // Item ids agree between added, deltas and done.
  EXPECT_EQ(ev[2]["item"]["id"], ev[4]["item_id"]);
  EXPECT_EQ(ev[2]["item"]["id"], done["output"][0]["id"]);
  EXPECT_EQ(ev[11]["output_index"], 1);
  EXPECT_EQ(ev[13]["text"], "Hello world");
}

// Hermes names the next call before the arguments of the one before: both items stay open.
TEST(Responses, CallsNamedAheadOfTheirArguments) {
  ResponsesEventStream s("resp_4", 7, "m", json::object());
  std::string sse = s.start();
  sse += s.piece("", "", {{0, std::string("call_a"), std::string("f"), ""}});
  sse += s.piece("", "", {{1, std::string("call_b"), std::string("g"), ""}});
  sse += s.piece("", "", {{0, std::nullopt, std::nullopt, "{\"x\": 1}"}});
  sse += s.piece("", "", {{1, std::nullopt, std::nullopt, "{}"}});
  sse += s.finish("completed", ResponseUsage{1, 1, 0});
  auto ev = events_of(sse);
  std::vector<std::string> types;
  for (const auto& e : ev) types.push_back(e["type"]);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added", "response.output_item.added",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(ev[3]["output_index"], 1);
  EXPECT_EQ(ev[4]["output_index"], 0);
  EXPECT_EQ(ev[5]["output_index"], 1);
  const json& out = ev.back()["response"]["output"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["call_id"], "call_a");
  EXPECT_EQ(out[0]["arguments"], "{\"x\": 1}");
  EXPECT_EQ(out[1]["name"], "g");
  EXPECT_EQ(out[1]["arguments"], "{}");
}

TEST(Responses, AStreamEndsIncompleteOrFailed) {
  ResponsesEventStream cut("resp_2", 7, "m", json::object());
  std::string sse = cut.start();  // one call after the other: the events are numbered in order
  sse += cut.piece("", "Hi", {});
  sse += cut.finish("incomplete", ResponseUsage{1, 1, 0});
  auto ev = events_of(sse);
  EXPECT_EQ(ev.back()["type"], "response.incomplete");
  EXPECT_EQ(ev.back()["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(ev[ev.size() - 2]["type"], "response.output_item.done");  // the open message is closed first
  ResponsesEventStream failed("resp_3", 7, "m", json::object());
  sse = failed.start();
  sse += failed.error("boom");
  sse += failed.finish("failed", ResponseUsage{});
  ev = events_of(sse);
  EXPECT_EQ(ev[2]["type"], "error");
  EXPECT_EQ(ev[2]["message"], "boom");
  EXPECT_EQ(ev.back()["type"], "response.failed");
  EXPECT_EQ(ev.back()["response"]["status"], "failed");
}

}  // namespace
}  // namespace troupe::openai
