// The reasoning parsers of --reasoning-parser (deepseek_r1, qwen3) on whole outputs as
// vLLM splits them, the streamer (every way of cutting the text into pieces gives the
// whole split), qwen3's enable_thinking false, and the registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/frontend/openai/chat_answer.hpp"
#include "runtime/frontend/openai/reasoning_parsers.hpp"
#include "runtime/frontend/openai/tool_parsers.hpp"

namespace troupe::openai {
namespace {

using Opt = std::optional<std::string>;

std::unique_ptr<ReasoningParser> parser(const std::string& name,
                                        const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) {
  auto p = make_reasoning_parser(name, kwargs);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(p).value() : nullptr;
}

void expect_split(const ReasoningParser& p, const std::string& text, Opt reasoning, Opt content) {
  SCOPED_TRACE(text);
  auto s = p.parse(text);
  EXPECT_EQ(s.reasoning, reasoning);
  EXPECT_EQ(s.content, content);
}

// The text streamed in pieces of `step` bytes (0: every single cut point in two).
ReasoningStreamer::Delta stream(const ReasoningParser& p, const std::vector<std::string>& pieces) {
  ReasoningStreamer st(p);
  ReasoningStreamer::Delta all;
  for (const auto& piece : pieces) {
    auto d = st.feed(piece);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  auto d = st.finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

// Streaming gives what the whole split gives (null as empty), however the text is cut.
void expect_stream_matches_whole(const ReasoningParser& p, const std::string& text) {
  SCOPED_TRACE(text);
  const auto whole = p.parse(text);
  const std::string reasoning = whole.reasoning.value_or(""), content = whole.content.value_or("");
  auto one = stream(p, {text});
  EXPECT_EQ(one.reasoning, reasoning);
  EXPECT_EQ(one.content, content);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  auto each = stream(p, bytes);
  EXPECT_EQ(each.reasoning, reasoning);
  EXPECT_EQ(each.content, content);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    auto two = stream(p, {text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(two.reasoning, reasoning) << "cut at " << cut;
    EXPECT_EQ(two.content, content) << "cut at " << cut;
  }
}

TEST(ReasoningParsers, DeepSeekR1Whole) {
  auto p = parser("deepseek_r1");
  expect_split(*p, "<think>Add them.</think>The answer is 4.", "Add them.", "The answer is 4.");
  // The template opened <think> in the prompt: the output starts inside it.
  expect_split(*p, "Add them.</think>\n\nThe answer is 4.", "Add them.", "\n\nThe answer is 4.");
  // Cut short while thinking: all reasoning, content null.
  expect_split(*p, "<think>Add them", "Add them", std::nullopt);
  expect_split(*p, "Still thinking", "Still thinking", std::nullopt);
  // Nothing after the end tag: content null; an empty reasoning stays a string.
  expect_split(*p, "<think>x</think>", "x", std::nullopt);
  expect_split(*p, "<think></think>Hi", "", "Hi");
  // Only the first end tag splits.
  expect_split(*p, "a</think>b</think>c", "a", "b</think>c");
}

TEST(ReasoningParsers, Qwen3ThinkingAndNot) {
  auto on = parser("qwen3");
  expect_split(*on, "<think>\nPlan.\n</think>\n\nHello!", "\nPlan.\n", "\n\nHello!");
  expect_split(*on, "Plan.</think>Hello!", "Plan.", "Hello!");  // <think> in the prompt
  expect_split(*on, "Plan without end", "Plan without end", std::nullopt);
  auto explicit_on = parser("qwen3", {{"enable_thinking", true}});
  expect_split(*explicit_on, "Plan without end", "Plan without end", std::nullopt);
  // enable_thinking false: the template wrote an empty <think></think> into the prompt,
  // so the output is content.
  auto off = parser("qwen3", {{"enable_thinking", false}});
  expect_split(*off, "Hello!", std::nullopt, "Hello!");
  expect_split(*off, "<think>\n\n</think>\n\nHello!", "\n\n", "\n\nHello!");
  // deepseek_r1 takes no kwargs: the same output stays reasoning.
  auto r1 = parser("deepseek_r1", {{"enable_thinking", false}});
  expect_split(*r1, "Hello!", "Hello!", std::nullopt);
}

TEST(ReasoningParsers, StreamingMatchesWhole) {
  const std::vector<std::string> texts = {
      "<think>Add 2 and 2.</think>The answer is 4.",
      "Add them.</think>\n\nThe answer is 4.",
      "<think>never ends <",
      "thinking </thi",
      "<think></think>",
      "</think>only content",
      "a</think>b</think>c <think> d",
      "<thin k>not a tag</think>x",
      "caf\xc3\xa9 \xe2\x9c\x93</think>\xe2\x9c\x93",
  };
  for (const char* name : {"deepseek_r1", "qwen3"}) {
    auto p = parser(name);
    for (const auto& t : texts) expect_stream_matches_whole(*p, t);
  }
  auto off = parser("qwen3", {{"enable_thinking", false}});
  for (const std::string t : {"Hello <think>x</think>", "\n<think>r</think>c", "plain", "<thi", "  "})
    expect_stream_matches_whole(*off, t);
}

TEST(ReasoningParsers, StreamerHoldsBackOnlyWhatMayBeATag) {
  auto p = parser("deepseek_r1");
  ReasoningStreamer st(*p);
  auto d = st.feed("I think </th");
  EXPECT_EQ(d.reasoning, "I think ");  // "</th" may begin the end tag
  EXPECT_TRUE(st.in_reasoning());
  d = st.feed("ink>Yes");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Yes");
  EXPECT_FALSE(st.in_reasoning());
  d = st.feed(" </think> <think>");  // after the reasoning, tags are content
  EXPECT_EQ(d.content, " </think> <think>");
}

class UpperTagParser final : public ReasoningParser {
 public:
  ReasoningSplit parse(const std::string& text) const override {
    const size_t e = text.find(end_);
    if (e == std::string::npos) return {text, std::nullopt};
    return {text.substr(0, e), text.substr(e + end_.size())};
  }
  const std::string& start_tag() const override { return start_; }
  const std::string& end_tag() const override { return end_; }
  bool starts_in_reasoning() const override { return true; }

 private:
  std::string start_ = "<THINK>", end_ = "</THINK>";
};

TEST(ReasoningParsers, Registry) {
  auto unknown = make_reasoning_parser("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "reasoning parser 'nope' is not registered (known: deepseek_r1, qwen3)");
  register_reasoning_parser("upper_test", [](const nlohmann::ordered_json&) {
    return std::make_unique<UpperTagParser>();
  });
  auto p = parser("upper_test");
  ASSERT_TRUE(p);
  expect_split(*p, "r</THINK>c", "r", "c");
  auto s = stream(*p, {"r</TH", "INK>c"});
  EXPECT_EQ(s.reasoning, "r");
  EXPECT_EQ(s.content, "c");
  const auto names = reasoning_parser_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "upper_test"), names.end());
}

// Reasoning first, tool calls from the content after it: whole and streamed byte by byte.
TEST(ReasoningParsers, ToolCallsComeFromTheContentAfterReasoning) {
  auto reasoning = parser("deepseek_r1");
  auto tools = make_tool_parser("hermes");
  ASSERT_TRUE(tools.ok());
  const ChatAnswerParsers parsers{reasoning.get(), true, tools->get()};
  const std::string text =
      "<think>Paris weather: call <tool>.</think>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  Choice whole;
  whole.text = text;
  whole.finish_reason = "stop";
  parse_chat_answer(parsers, &whole);
  EXPECT_TRUE(whole.has_reasoning);
  EXPECT_EQ(whole.reasoning, "Paris weather: call <tool>.");
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].name, "get_weather");
  EXPECT_EQ(whole.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(whole.finish_reason, "tool_calls");

  ChatAnswerStreamer st(parsers);
  std::string r, c;
  std::vector<ToolCallDelta> calls;
  for (size_t i = 0; i < text.size(); ++i) {
    auto d = st.feed(text.substr(i, 1), i + 1 == text.size());
    r += d.reasoning;
    c += d.content;
    for (auto& call : d.calls) {
      if (call.id) calls.push_back(call);  // the id and name (hermes sends them ahead of the arguments)
      else if (!calls.empty()) calls.back().arguments += call.arguments;
    }
  }
  EXPECT_EQ(r, *whole.reasoning);
  EXPECT_EQ(c, whole.text);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, whole.tool_calls[0].arguments);
  EXPECT_TRUE(st.called());

  // A call written inside the reasoning is not a call; include_reasoning false drops the reasoning.
  Choice inside;
  inside.text = "<think><tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call></think>Sunny.";
  parse_chat_answer({reasoning.get(), false, tools->get()}, &inside);
  EXPECT_TRUE(inside.tool_calls.empty());
  EXPECT_EQ(inside.text, "Sunny.");
  EXPECT_FALSE(inside.has_reasoning);
  EXPECT_FALSE(inside.reasoning);
  // Cut short while thinking: no content, so no calls either.
  Choice cut;
  cut.text = "<think>I will call <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  parse_chat_answer(parsers, &cut);
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_TRUE(cut.content_null);
}

}  // namespace
}  // namespace troupe::openai
