// A chat answer's text as vLLM returns it with --reasoning-parser and tool_choice
// "auto": the reasoning split off first, then tool calls parsed from the content
// after it (never from the reasoning), whole or as the answer streams.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/frontend/openai/reasoning_parsers.hpp"
#include "runtime/frontend/openai/render.hpp"
#include "runtime/frontend/openai/tool_parsers.hpp"

namespace troupe::openai {

/// The parsers of one request; either may be null.
struct ChatAnswerParsers {
  const ReasoningParser* reasoning = nullptr;
  bool include_reasoning = true;  // vLLM's include_reasoning: false drops reasoning_content
  const ToolParser* tools = nullptr;
};

/// `answer->text` is the model's whole text. Sets the reasoning (has_reasoning with a
/// reasoning parser), the content (content_null when there is none) and the tool calls
/// (their finish_reason is then "tool_calls", as vLLM's).
void parse_chat_answer(const ChatAnswerParsers& parsers, Choice* answer);

class ChatAnswerStreamer {
 public:
  explicit ChatAnswerStreamer(const ChatAnswerParsers& parsers);
  struct Delta {
    std::string reasoning;  // whatever include_reasoning says: the caller decides what to send
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  /// The next piece of text; `final`: the answer ended (what was held back is flushed).
  Delta feed(std::string_view text, bool final);
  /// Whether a tool call was sent.
  bool called() const { return tools_ && tools_->called(); }

 private:
  std::optional<ReasoningStreamer> reasoning_;
  std::optional<ToolCallStreamer> tools_;
};

}  // namespace troupe::openai
