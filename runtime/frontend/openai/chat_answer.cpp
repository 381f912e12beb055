#include "runtime/frontend/openai/chat_answer.hpp"

namespace troupe::openai {

void parse_chat_answer(const ChatAnswerParsers& parsers, Choice* answer) {
  if (parsers.reasoning) {
    // vLLM: reasoning_content, and the content after it (null when none).
    ReasoningSplit split = parsers.reasoning->parse(answer->text);
    answer->has_reasoning = parsers.include_reasoning;
    if (parsers.include_reasoning) answer->reasoning = std::move(split.reasoning);
    answer->content_null = !split.content;
    answer->text = split.content.value_or("");
  }
  if (parsers.tools && !answer->content_null) {
    ParsedToolCalls parsed = parsers.tools->parse(answer->text);
    if (!parsed.calls.empty()) {
      answer->tool_calls = std::move(parsed.calls);
      answer->content_null = !parsed.content;
      answer->text = parsed.content.value_or("");
      answer->finish_reason = "tool_calls";
    }
  }
}

ChatAnswerStreamer::ChatAnswerStreamer(const ChatAnswerParsers& parsers) {
  if (parsers.reasoning) reasoning_.emplace(*parsers.reasoning);
  if (parsers.tools) tools_.emplace(*parsers.tools);
}

ChatAnswerStreamer::Delta ChatAnswerStreamer::feed(std::string_view text, bool final) {
  Delta out;
  std::string content(text);
  if (reasoning_) {
    // Reasoning until the end tag; only the content after it goes on to the tool parser.
    auto d = reasoning_->feed(text);
    if (final) {
      auto rest = reasoning_->finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
    out.reasoning = std::move(d.reasoning);
    content = std::move(d.content);
  }
  if (tools_) {
    // Content until a call may begin, then the calls as they complete.
    auto d = tools_->feed(content);
    if (final) {
      auto rest = tools_->finish();
      d.content += rest.content;
      for (auto& call : rest.calls) d.calls.push_back(std::move(call));
    }
    content = std::move(d.content);
    out.calls = std::move(d.calls);
  }
  out.content = std::move(content);
  return out;
}

}  // namespace troupe::openai
