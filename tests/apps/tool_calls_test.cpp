// Tool calling's request side (tools and tool_choice validated, the constraint of
// "required" and a named function) and its answer side (the constrained output as
// tool_calls, whole and streamed, at every split of the text into deltas).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/rank/structured/grammar_frontends.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "tests/runtime/rank/structured/grammar_test_util.hpp"
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
  EXPECT_EQ(json::parse(r.common.sampling.structured_spec)["required"], json::array({"city"}));
  EXPECT_TRUE(r.common.sampling.validate().ok());

  ASSERT_FALSE(parse(kTools + R"(,"tool_choice":"required")", &r));
  EXPECT_EQ(r.tools.choice, ToolChoice::required);
  auto schema = structured::compile_json_schema_grammar(r.common.sampling.structured_spec);
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  auto admitted = [&](const std::string& text) { return structured::testing::accepts(*schema, text); };
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
  auto single = structured::compile_json_schema_grammar(r.common.sampling.structured_spec);
  ASSERT_TRUE(single.ok()) << single.status().message();
  auto admitted_single = [&](const std::string& text) { return structured::testing::accepts(*single, text); };
  EXPECT_TRUE(admitted_single(R"([{"name":"now","parameters":{}}])"));
  EXPECT_FALSE(admitted_single(R"([{"name":"get_weather","parameters":{"city":"Oslo"}},{"name":"now","parameters":{}}])"));
  EXPECT_FALSE(admitted_single(R"([])"));
  // Parameters without a "type" are an object.
  ASSERT_FALSE(parse(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"type":"integer"}}}}}],
                        "tool_choice":{"type":"function","function":{"name":"f"}})",
                     &r));
  EXPECT_EQ(json::parse(r.common.sampling.structured_spec)["type"], "object");
}

// Real tool schemas: references into the tool's own $defs, anyOf with null, ranges; under
// "required" each tool's schema sits under the list schema's $defs, its references re-rooted.
TEST(ToolCalls, RealToolSchemasThroughTheGrammarEngine) {
  const std::string tools = R"("tools":[
    {"type":"function","function":{"name":"book","parameters":{"type":"object",
      "$defs":{"day":{"type":"string","format":"date"}},
      "properties":{"when":{"$ref":"#/$defs/day"},"seats":{"anyOf":[{"type":"integer","minimum":1,"maximum":9},{"type":"null"}]}},
      "required":["when","seats"]}}},
    {"type":"function","function":{"name":"now"}}])";
  ChatCompletionRequest r;
  ASSERT_FALSE(parse(tools + R"(,"tool_choice":"required")", &r));
  auto g = structured::compile_json_schema_grammar(r.common.sampling.structured_spec);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(structured::testing::accepts(*g, R"([{"name": "book", "parameters": {"when": "2025-02-28", "seats": null}}])"));
  EXPECT_TRUE(structured::testing::accepts(*g, R"([{"name": "book", "parameters": {"when": "2024-02-29", "seats": 2}}, {"name": "now", "parameters": {}}])"));
  EXPECT_FALSE(structured::testing::accepts(*g, R"([{"name": "book", "parameters": {"when": "2025-02-29", "seats": 2}}])"));
  EXPECT_FALSE(structured::testing::accepts(*g, R"([{"name": "book", "parameters": {"when": "2025-02-28", "seats": 10}}])"));
  ASSERT_FALSE(parse(tools + R"(,"tool_choice":{"type":"function","function":{"name":"book"}})", &r));
  g = structured::compile_json_schema_grammar(r.common.sampling.structured_spec);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(structured::testing::accepts(*g, R"({"when": "2025-01-31", "seats": 9})"));
  // A schema the engine cannot enforce: a 400 naming the keyword.
  auto e = parse(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","not":{"required":["a"]}}}}],
                    "tool_choice":"required")",
                 &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
  EXPECT_NE(e->message.find("'not'"), std::string::npos) << e->message;
}

// strict tools: compiled at admission whatever the choice; under "auto" with the hermes
// parser their calls are enforced by a structural tag.
TEST(ToolCalls, StrictToolsAreCompiledAndEnforcedWithHermes) {
  ChatCompletionRequest r;
  auto e = parse(R"("tools":[{"type":"function","function":{"name":"f","strict":true,
                    "parameters":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}}}],
                    "tool_choice":"none")",
                 &r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'uniqueItems'"), std::string::npos) << e->message;
  e = parse(R"("tools":[{"type":"function","function":{"name":"f","strict":"yes"}}])", &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
  ASSERT_FALSE(parse(R"("tools":[{"type":"function","function":{"name":"get_weather","strict":true,
                        "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
                       {"type":"function","function":{"name":"loose"}}])",
                     &r));
  EXPECT_EQ(r.tools.choice, ToolChoice::automatic);
  EXPECT_TRUE(r.common.sampling.structured_output.empty());
  ASSERT_FALSE(constrain_strict_tools(r.tools, "llama3_json", {}, &r.common.sampling));
  EXPECT_TRUE(r.common.sampling.structured_output.empty());  // not this parser's format
  ASSERT_FALSE(constrain_strict_tools(r.tools, "hermes", {}, &r.common.sampling));
  ASSERT_EQ(r.common.sampling.structured_output, "structural_tag");
  EXPECT_TRUE(r.common.sampling.validate().ok());
  auto g = structured::compile_structural_tag(r.common.sampling.structured_spec);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(structured::testing::accepts(*g, "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                               "{\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_TRUE(structured::testing::accepts(*g, "No call needed."));
  EXPECT_FALSE(structured::testing::accepts(*g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(structured::testing::accepts(*g, "<tool_call>\n{\"name\": \"loose\", \"arguments\": {}}\n</tool_call>"));
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
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}}}],"tool_choice":"required")",
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
