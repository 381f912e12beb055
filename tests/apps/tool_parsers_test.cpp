// The tool-call parsers of tool_choice "auto" (hermes, llama3_json, mistral,
// pythonic) on whole outputs, the streamer that holds back what may start a call
// (every split of the text gives the same content and calls, and a call's
// argument fragments join to its non-streamed arguments), the partial-JSON
// reading behind it, and the registry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/frontend/openai/partial_json.hpp"
#include "runtime/frontend/openai/tool_parsers.hpp"
#include "runtime/frontend/openai/tools.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;

std::unique_ptr<ToolParser> parser(const std::string& name) {
  auto p = make_tool_parser(name);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(p).value() : nullptr;
}

void expect_call(const ToolCall& c, const std::string& name, const json& args) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(json::parse(c.arguments, nullptr, false), args) << c.arguments;
  EXPECT_EQ(c.id.rfind("chatcmpl-tool-", 0), 0u);
}

TEST(ToolParsers, Hermes) {
  auto p = parser("hermes");
  auto r = p->parse("Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                    "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Let me check.");
  expect_call(r.calls[0], "get_weather", {{"city", "Paris"}});
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");  // json.dumps, as vLLM
  expect_call(r.calls[1], "now", json::object());
  r = p->parse("<tool_call>{\"name\": \"now\", \"arguments\": {}}");  // unclosed: still a call
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_FALSE(r.content);
  r = p->parse("plain answer");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "plain answer");
  r = p->parse("<tool_call>{\"name\": broken</tool_call>");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "<tool_call>{\"name\": broken</tool_call>");
}

TEST(ToolParsers, Llama3Json) {
  auto p = parser("llama3_json");
  auto r = p->parse("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; "
                    "{\"name\": \"now\", \"arguments\": {}}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_FALSE(r.content);
  expect_call(r.calls[0], "get_weather", {{"city", "Oslo"}});
  expect_call(r.calls[1], "now", json::object());
  r = p->parse(" {\"name\": \"f\", \"parameters\": {\"a\": [1, {\"b\": \"}\"}]}}");
  ASSERT_EQ(r.calls.size(), 1u);
  expect_call(r.calls[0], "f", {{"a", {1, {{"b", "}"}}}}});
  EXPECT_TRUE(p->parse("The answer is {\"name\": \"f\"}").calls.empty());  // not at the start
  EXPECT_TRUE(p->parse("{\"nom\": \"f\"}").calls.empty());
}

TEST(ToolParsers, Mistral) {
  auto p = parser("mistral");
  auto r = p->parse("Sure. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, "
                    "{\"name\": \"now\", \"arguments\": \"{}\"}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Sure. ");
  expect_call(r.calls[0], "get_weather", {{"city", "Rome"}});
  expect_call(r.calls[1], "now", json::object());
  EXPECT_TRUE(p->parse("[TOOL_CALLS] not json").calls.empty());
}

TEST(ToolParsers, Pythonic) {
  auto p = parser("pythonic");
  auto r = p->parse("[get_weather(city='San Francisco', days=3, metric=True), now(), "
                    "f(x=[1, 2.5, None], y={'k': \"v\"})]");
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_FALSE(r.content);
  expect_call(r.calls[0], "get_weather", {{"city", "San Francisco"}, {"days", 3}, {"metric", true}});
  expect_call(r.calls[1], "now", json::object());
  expect_call(r.calls[2], "f", {{"x", {1, 2.5, nullptr}}, {"y", {{"k", "v"}}}});
  EXPECT_TRUE(p->parse("[1, 2, 3]").calls.empty());
  EXPECT_TRUE(p->parse("I would call [f(a=1)] now").calls.empty());
  EXPECT_TRUE(p->parse("[f(a=)]").calls.empty());
}

struct StreamResult {
  std::string content;
  std::vector<ToolCall> calls;
};

StreamResult stream(const ToolParser& p, const std::vector<std::string>& pieces) {
  ToolCallStreamer s(p);
  StreamResult out;
  auto take = [&](ToolCallStreamer::Delta d) {
    out.content += d.content;
    // A call's first delta has its id and name (maybe ahead of its arguments), later ones more arguments.
    for (auto& c : d.calls) {
      if (c.id) {
        EXPECT_EQ(static_cast<size_t>(c.index), out.calls.size());
        EXPECT_TRUE(c.name);
        out.calls.push_back({*c.id, c.name.value_or(""), c.arguments});
      } else {
        EXPECT_FALSE(c.name);
        ASSERT_LT(static_cast<size_t>(c.index), out.calls.size()) << "arguments of a call not begun";
        out.calls[c.index].arguments += c.arguments;
      }
    }
  };
  for (const auto& piece : pieces) take(s.feed(piece));
  take(s.finish());
  return out;
}

TEST(ToolParsers, StreamingGivesTheSameAtEverySplit) {
  struct Case {
    const char* parser;
    std::string text;
  };
  const Case cases[] = {
      {"hermes", "I'll look <tool>.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa<tool_call>\"}}\n"
                 "</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"},
      {"hermes", "No calls here, only a < and <tool_ca."},
      {"llama3_json", "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}"},
      {"llama3_json", "  Plain text {not a call}"},
      {"mistral", "Hi [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}]"},
      {"pythonic", "[f(a=1), g(b='x')]"},
      {"pythonic", "[not a call"},
      // Arguments that stream in pieces: nesting, escapes, non-ASCII, numbers, keys out of order.
      {"hermes", "<tool_call>{\"name\": \"f\", \"arguments\":{\"z\":[1,2.50,-3e2,true,null],\"a\":\"q\\\"\\u00e9\\ud83d\\ude00 "
                 "\xE6\x97\xA5\",\"o\":{ }}}</tool_call>"},
      {"llama3_json", "{\"name\": \"f\", \"parameters\": {\"b\": {\"c\": [\"x\", {}]}, \"a\": 10}}; "
                      "{\"name\": \"g\", \"parameters\": {\"k\": \"v\"}}"},
      {"mistral", "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"b\": 1, \"a\": \"two words\"}}, "
                  "{\"name\": \"g\", \"arguments\": \"{}\"}]"},
      {"pythonic", "<|python_start|>[f(b=[1, 'two'], a={'k': None}), g(), h(x=\"y\")]<|python_end|>"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.parser) + ": " + c.text);
    auto p = parser(c.parser);
    const ParsedToolCalls whole = p->parse(c.text);
    auto check = [&](const StreamResult& r) {
      ASSERT_EQ(r.calls.size(), whole.calls.size());
      for (size_t i = 0; i < r.calls.size(); ++i) {
        EXPECT_EQ(r.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(r.calls[i].arguments, whole.calls[i].arguments);
      }
      EXPECT_EQ(r.content, whole.content.value_or(""));
    };
    for (size_t a = 0; a <= c.text.size(); ++a) check(stream(*p, {c.text.substr(0, a), c.text.substr(a)}));
    std::vector<std::string> bytes;
    for (char ch : c.text) bytes.emplace_back(1, ch);
    check(stream(*p, bytes));
  }
}

TEST(ToolParsers, HermesStreamsContentBeforeTheCallAtOnce) {
  auto p = parser("hermes");
  ToolCallStreamer s(*p);
  EXPECT_EQ(s.feed("Hello <tool").content, "Hello ");  // "<tool" may begin a call: held back
  EXPECT_EQ(s.feed("s>").content, "<tools>");
  auto d = s.feed("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(d.content.empty());
  ASSERT_EQ(d.calls.size(), 1u);  // written whole: its name and arguments at once
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{}");
  EXPECT_TRUE(s.called());
  EXPECT_TRUE(s.finish().calls.empty());
}

// Hermes: a call's id and name are sent as soon as its name is written, then its
// arguments as they are written (in json.dumps form), the rest when a parse confirms it.
TEST(ToolParsers, HermesStreamsTheNameBeforeTheArguments) {
  auto p = parser("hermes");
  ToolCallStreamer s(*p);
  auto d = s.feed("<tool_call>\n{\"name\": \"get_wea");
  EXPECT_TRUE(d.calls.empty());
  d = s.feed("ther\", \"arguments\": {\"city\":");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_TRUE(d.calls[0].id);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "{\"city\": ");
  EXPECT_TRUE(s.called());
  d = s.feed("\"Pa");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_FALSE(d.calls[0].id);
  EXPECT_EQ(d.calls[0].arguments, "\"Pa");
  d = s.feed("ris\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\", ");
  // The second call is named; the first one's end waits for a parse of the region.
  ASSERT_EQ(d.calls.size(), 1u) << d.calls[0].arguments;
  EXPECT_EQ(d.calls[0].index, 1);
  EXPECT_EQ(d.calls[0].name, "now");
  d = s.feed("\"arguments\": {}}</tool_call>");  // both parse: the first is finished, the second written
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_FALSE(d.calls[0].id);
  EXPECT_EQ(d.calls[0].arguments, "ris\"}");
  EXPECT_EQ(d.calls[1].index, 1);
  EXPECT_EQ(d.calls[1].arguments, "{}");
  EXPECT_TRUE(s.finish().calls.empty());
}

// Every parser streams a call's arguments in several fragments, byte by byte, which join
// to the arguments of the whole parse.
TEST(ToolParsers, ArgumentsStreamInPieces) {
  const std::pair<const char*, std::string> cases[] = {
      {"hermes", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}</tool_call>"},
      {"llama3_json", "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}"},
      {"mistral", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}]"},
      {"pythonic", "[get_weather(city='Paris', unit='celsius')]"},
  };
  for (const auto& [name, text] : cases) {
    SCOPED_TRACE(name);
    auto p = parser(name);
    const ParsedToolCalls whole = p->parse(text);
    ASSERT_EQ(whole.calls.size(), 1u);
    EXPECT_EQ(whole.calls[0].arguments, "{\"city\": \"Paris\", \"unit\": \"celsius\"}");
    ToolCallStreamer s(*p);
    std::vector<std::string> fragments;
    bool named = false;
    auto take = [&](const ToolCallStreamer::Delta& d) {
      for (const auto& c : d.calls) {
        EXPECT_EQ(c.index, 0);
        if (c.id) {
          EXPECT_FALSE(named) << "one first delta";
          EXPECT_EQ(c.name, "get_weather");
          named = true;
        }
        EXPECT_TRUE(named) << "arguments before the name";
        if (!c.arguments.empty()) fragments.push_back(c.arguments);
      }
    };
    for (char ch : text) take(s.feed(std::string(1, ch)));
    take(s.finish());
    std::string joined;
    for (const auto& f : fragments) joined += f;
    EXPECT_EQ(joined, whole.calls[0].arguments);
    EXPECT_GE(fragments.size(), name == std::string("pythonic") ? 3u : 8u) << "in pieces";
  }
}

// stable_json_prefix: each longer text extends the last result, and a whole value gives json.dumps.
TEST(PartialJson, StablePrefixGrowsIntoPythonDumps) {
  const std::string texts[] = {
      "{\"city\":\"Paris\",\"unit\" :  \"celsius\"}",
      "{\"z\": [1, 2.5, -3e2, true, false, null, {\"b\": \"x\\\"y\\\\z\\n\\u00e9\\ud83d\\ude00\\/\"}], \"c\": {}, \"d\": []}",
      "[ ]",
      "{\"s\": \"na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\", \"n\": 10, \"m\": 1.0, \"k\": 0.1}",
  };
  for (const std::string& t : texts) {
    SCOPED_TRACE(t);
    std::string last;
    for (size_t k = 0; k <= t.size(); ++k) {
      const std::string p = stable_json_prefix(std::string_view(t).substr(0, k));
      ASSERT_EQ(p.compare(0, last.size(), last), 0) << "at " << k << ": '" << p << "' after '" << last << "'";
      last = p;
    }
    EXPECT_EQ(last, python_json_dumps(nlohmann::ordered_json::parse(t)));
  }
  EXPECT_EQ(stable_json_prefix("{\"city\": \"Pa"), "{\"city\": \"Pa");
  EXPECT_EQ(stable_json_prefix("{\"n\": 12"), "{\"n\": ");  // the number may go on
  EXPECT_EQ(stable_json_prefix("{\"s\": \"x\\u00"), "{\"s\": \"x");  // half an escape
  EXPECT_EQ(stable_json_prefix("{\"s\": \"x\xE6\x97"), "{\"s\": \"x");  // half a UTF-8 character
  EXPECT_EQ(stable_json_prefix("{\"a\": 1, \"b\" x"), "{\"a\": 1, ");  // stops where it is not JSON
  EXPECT_EQ(stable_json_prefix("{\"ke"), "{");  // keys come whole
}

TEST(PartialJson, ScansACallObjectAsFarAsItIsWritten) {
  auto c = scan_json_call(" {\"name\": \"f\", \"arguments\": {\"a\": [1", {"arguments"});
  EXPECT_EQ(c.name, "f");
  ASSERT_TRUE(c.arguments);
  EXPECT_EQ(*c.arguments, "{\"a\": [1");
  EXPECT_FALSE(c.complete);
  c = scan_json_call("{\"parameters\": {}, \"name\": \"g\", \"arguments\": [2]}", {"parameters", "arguments"});
  EXPECT_EQ(c.name, "g");
  EXPECT_EQ(c.arguments, "{}");  // the preferred key
  EXPECT_TRUE(c.complete);
  c = scan_json_call("{\"name\": \"f", {"arguments"});
  EXPECT_FALSE(c.name);
  EXPECT_EQ(json_value_end("{\"a\": \"}\"} tail", 0), 10u);
  EXPECT_EQ(json_value_end("[1, {\"b\": 2}", 0), std::string_view::npos);
  EXPECT_EQ(json_value_end("123", 0), std::string_view::npos);  // may go on
  EXPECT_EQ(json_value_end("[1}", 0), std::string_view::npos);
}

TEST(ToolParsers, RegistryNamesParsersAndTakesNewOnes) {
  auto unknown = make_tool_parser("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("hermes, llama3_json, mistral, pythonic"), std::string::npos)
      << unknown.status().message();
  struct Upper : ToolParser {
    ParsedToolCalls parse(const std::string& text) const override {
      if (text.rfind("CALL ", 0) != 0) return {text, {}};
      return {std::nullopt, {{"chatcmpl-tool-x", text.substr(5), "{}"}}};
    }
    std::vector<std::string> markers() const override { return {"CALL "}; }
  };
  register_tool_parser("upper", [] { return std::make_unique<Upper>(); });
  auto p = parser("upper");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->parse("CALL f").calls.at(0).name, "f");
}

}  // namespace
}  // namespace troupe::openai
