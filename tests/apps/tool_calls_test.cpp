// Tool calling's request side (tools and tool_choice validated, the constraint of
// "required" and a named function) and its answer side (the constrained output as
// tool_calls, whole and streamed, at every split of the text into deltas).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/rank/structured/json_matcher.hpp"
#include "runtime/rank/structured/json_schema.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "runtime/frontend/openai/render.hpp"
#include "runtime/frontend/openai/tools.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;

const std::string kTools = R"("tools":[
  {"type":"function","function":{"name":"get_weather","description":"d",
   "parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}},
  {"type":"function","function":{"name":"now"}}])";
const std::string kMsgs = R"("messages":[{"role":"user","content":"x"}])";

std::optional<ApiError> parse(const std::string& rest, ChatCompletionRequest* r) {
  return parse_chat_request("{" + kMsgs + "," + rest + "}", Limits{}, r);
}

TEST(ToolCalls, ToolChoiceAndItsConstraint) {
  ChatCompletionRequest r;
  ASSERT_FALSE(parse(kTools + R"(,"tool_choice":"none")", &r));
  EXPECT_EQ(r.tools.choice, ToolChoice::none);
  EXPECT_TRUE(r.common.sampling.structured_output.empty());
  EXPECT_FALSE(r.chat.tools.is_null());  // the template still sees them, as in vLLM

  ASSERT_FALSE(parse(kTools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})", &r));
  EXPECT_EQ(r.tools.choice, ToolChoice::named);
  EXPECT_EQ(r.common.sampling.structured_output, "json_schema");
  EXPECT_EQ(json::parse(r.common.sampling.json_schema)["required"], json::array({"city"}));
  EXPECT_TRUE(r.common.sampling.validate().ok());

  ASSERT_FALSE(parse(kTools + R"(,"tool_choice":"required")", &r));
  EXPECT_EQ(r.tools.choice, ToolChoice::required);
  auto schema = structured::compile_json_schema(r.common.sampling.json_schema);
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  auto admitted = [&](const std::string& text) {
    structured::JsonMatcher m(schema->get());
    return m.feed(text) && m.complete();
  };
  EXPECT_TRUE(admitted(R"([{"name":"get_weather","parameters":{"city":"Oslo"}},{"name":"now","parameters":{}}])"));
  EXPECT_FALSE(admitted(R"([{"name":"get_weather","parameters":{"days":1}}])"));  // city is required
  EXPECT_FALSE(admitted(R"([{"name":"later","parameters":{}}])"));
  EXPECT_FALSE(admitted(R"([])"));
  // Undeclared keys are not let in (xgrammar's strict mode, vLLM's default), nor in "now"'s
  // empty parameters.
  EXPECT_FALSE(admitted(R"([{"name":"get_weather","parameters":{"city":"Oslo","note":"x"}}])"));
  EXPECT_FALSE(admitted(R"([{"name":"now","parameters":{"x":1}}])"));
  // parallel_tool_calls false: at most one call (a model cannot write calls until max_tokens).
  ASSERT_FALSE(parse(kTools + R"(,"tool_choice":"required","parallel_tool_calls":false)", &r));
  auto single = structured::compile_json_schema(r.common.sampling.json_schema);
  ASSERT_TRUE(single.ok()) << single.status().message();
  auto admitted_single = [&](const std::string& text) {
    structured::JsonMatcher m(single->get());
    return m.feed(text) && m.complete();
  };
  EXPECT_TRUE(admitted_single(R"([{"name":"now","parameters":{}}])"));
  EXPECT_FALSE(admitted_single(R"([{"name":"get_weather","parameters":{"city":"Oslo"}},{"name":"now","parameters":{}}])"));
  EXPECT_FALSE(admitted_single(R"([])"));
  // Parameters without a "type" are an object.
  ASSERT_FALSE(parse(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"type":"integer"}}}}}],
                        "tool_choice":{"type":"function","function":{"name":"f"}})",
                     &r));
  EXPECT_EQ(json::parse(r.common.sampling.json_schema)["type"], "object");
}

TEST(ToolCalls, BadToolsAndChoicesAre400sNamingTheField) {
  ChatCompletionRequest r;
  const std::pair<std::string, std::string> bad[] = {
      {R"("tools":{"type":"function"})", "tools"},
      {R"("tools":[{"type":"retrieval","function":{"name":"f"}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":"a b"}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":""}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])", "tools"},
      {R"("tools":[{"type":"function"}])", "tools"},
      {kTools + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {kTools + R"(,"tool_choice":{"type":"function","function":{"name":"later"}})", "tool_choice"},
      {R"("tool_choice":"required")", "tool_choice"},
      {kTools + R"(,"tool_choice":"required","response_format":{"type":"json_object"})", "tool_choice"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}}}],"tool_choice":"required")",
       "tools"},
  };
  for (const auto& [body, param] : bad) {
    auto e = parse(body, &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
    EXPECT_EQ(e->http_status, 400);
  }
  auto e = parse(R"("tools":[{"type":"function","function":{"name":"a b"}}])", &r);
  EXPECT_NE(e->message.find("tools[0].function.name"), std::string::npos) << e->message;
  e = parse(kTools + R"(,"tool_choice":{"type":"function","function":{"name":"later"}})", &r);
  EXPECT_NE(e->message.find("later"), std::string::npos) << e->message;
}

ToolsRequest tools_of(const std::string& choice) {
  ChatCompletionRequest r;
  EXPECT_FALSE(parse(kTools + R"(,"tool_choice":)" + choice, &r));
  return r.tools;
}

TEST(ToolCalls, WholeOutputsBecomeToolCalls) {
  auto named = forced_tool_calls(tools_of(R"({"type":"function","function":{"name":"get_weather"}})"),
                                 R"({"city": "Oslo"})");
  ASSERT_TRUE(named.ok());
  ASSERT_EQ(named->size(), 1u);
  EXPECT_EQ((*named)[0].name, "get_weather");
  EXPECT_EQ((*named)[0].arguments, R"({"city": "Oslo"})");
  EXPECT_EQ((*named)[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ((*named)[0].id.size(), std::string("chatcmpl-tool-").size() + 32);

  const ToolsRequest required = tools_of(R"("required")");
  auto calls = forced_tool_calls(required, R"([{"name":"get_weather","parameters":{"city":"Ø","days":2}},
                                              {"name":"now","parameters":{}}])");
  ASSERT_TRUE(calls.ok());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].arguments, R"({"city": "Ø", "days": 2})");  // json.dumps(ensure_ascii=False)
  EXPECT_EQ((*calls)[1].name, "now");
  EXPECT_NE((*calls)[0].id, (*calls)[1].id);
  EXPECT_FALSE(forced_tool_calls(required, R"([{"name":"get_weather","parameters":{"ci)").ok());

  Choice c;
  c.tool_calls = *calls;
  c.finish_reason = "stop";
  const json body = json::parse(render_chat_completion("chatcmpl-1", 1, "m", {c}, Usage{}, nullptr));
  const json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], "");
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>())["days"], 2);
}

// The calls a stream's deltas add up to: one per index, the name and id from its first delta.
std::vector<ToolCall> assemble(const std::vector<ToolCallDelta>& deltas) {
  std::vector<ToolCall> calls;
  for (const auto& d : deltas) {
    if (d.id) {
      EXPECT_EQ(static_cast<size_t>(d.index), calls.size());
      EXPECT_TRUE(d.name.has_value());
      calls.push_back({*d.id, *d.name, ""});
    } else {
      EXPECT_FALSE(d.name.has_value());
    }
    EXPECT_FALSE(calls.empty());
    if (calls.empty()) return calls;
    EXPECT_EQ(static_cast<size_t>(d.index), calls.size() - 1);
    calls.back().arguments += d.arguments;
  }
  return calls;
}

TEST(ToolCalls, RequiredStreamsTheSameCallsAtEverySplit) {
  const ToolsRequest required = tools_of(R"("required")");
  const std::string text =
      R"([ {"name": "get_weather", "parameters": {"city": "a \"}\" b", "days": 3}}, {"name":"now","parameters":{}} ])";
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 7) {
      ForcedToolCallStream stream(required, 0);
      std::vector<ToolCallDelta> deltas;
      for (auto piece : {text.substr(0, a), text.substr(a, b - a), text.substr(b)})
        for (auto& d : stream.feed(piece)) deltas.push_back(std::move(d));
      const auto calls = assemble(deltas);
      ASSERT_EQ(calls.size(), 2u) << a << " " << b;
      EXPECT_EQ(calls[0].name, "get_weather");
      EXPECT_EQ(calls[0].arguments, R"({"city": "a \"}\" b", "days": 3})");
      EXPECT_EQ(calls[1].name, "now");
      EXPECT_EQ(calls[1].arguments, "{}");
      EXPECT_TRUE(stream.streamed());
    }
  }
  // Byte by byte too.
  ForcedToolCallStream stream(required, 0);
  std::vector<ToolCallDelta> deltas;
  for (char ch : text)
    for (auto& d : stream.feed(std::string(1, ch))) deltas.push_back(std::move(d));
  EXPECT_EQ(assemble(deltas).size(), 2u);
}

TEST(ToolCalls, NamedStreamsTheTextAsArguments) {
  const ToolsRequest named = tools_of(R"({"type":"function","function":{"name":"get_weather"}})");
  ForcedToolCallStream stream(named, 2);
  auto first = stream.feed(R"({"ci)");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].id && first[0].name);
  EXPECT_EQ(first[0].index, 2);  // vLLM: the choice's index
  auto next = stream.feed(R"(ty": "x"})");
  ASSERT_EQ(next.size(), 1u);
  EXPECT_FALSE(next[0].id || next[0].name);
  EXPECT_EQ(first[0].arguments + next[0].arguments, R"({"city": "x"})");

  Choice c;
  c.tool_call_deltas = first;
  const json chunk = json::parse(render_chat_chunk("chatcmpl-1", 1, "m", c, false, nullptr));
  const json& call = chunk["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_FALSE(chunk["choices"][0]["delta"].contains("content"));
}

}  // namespace
}  // namespace troupe::openai
