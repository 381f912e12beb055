// vLLM's tool-call parsers for tool_choice "auto" (`--tool-call-parser NAME`): a
// model's free text split into content and tool calls, whole or as it streams.
// Built in: hermes (<tool_call>{"name", "arguments"}</tool_call>, Qwen/SmolLM
// style), llama3_json ({"name", "parameters"} JSON, maybe after <|python_tag|>),
// mistral ([TOOL_CALLS][{...}]) and pythonic ([f(a=1, b="x")]). More are added by
// name with register_tool_parser (a runtime registry: parsers are C++ code of the
// process, they do not cross the plugin ABI).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/frontend/openai/render.hpp"
#include "troupe/status.hpp"

namespace troupe::openai {

/// A whole output split: the text outside the calls (nullopt: none, vLLM's null) and the calls.
struct ParsedToolCalls {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  /// The whole output; no calls found (or calls that do not parse): the text is the content.
  virtual ParsedToolCalls parse(const std::string& text) const = 0;
  /// Texts that begin the calls' region. `anywhere`: also after content (else only at the
  /// start of the output, leading whitespace aside).
  virtual std::vector<std::string> markers() const = 0;
  virtual bool markers_anywhere() const { return true; }
  /// The last call of `region` (the text from the first marker), being written or just
  /// written: its index among the region's calls and its name, once the name is complete,
  /// and the part of its final arguments text that is already fixed (stable_json_prefix;
  /// "" when none). Streaming sends the name, then the arguments in pieces; nullopt (the
  /// default): calls are sent whole.
  struct PendingCall {
    size_t index = 0;
    std::string name;
    std::string arguments;
  };
  virtual std::optional<PendingCall> pending_call(const std::string& region) const {
    (void)region;
    return std::nullopt;
  }
};

using ToolParserFactory = std::function<std::unique_ptr<ToolParser>()>;

/// Adds a parser under `name` (replacing one of that name).
void register_tool_parser(const std::string& name, ToolParserFactory factory);
/// The parser named `name`; not_found listing the known names otherwise.
Result<std::unique_ptr<ToolParser>> make_tool_parser(const std::string& name);
/// The registered names, sorted.
std::vector<std::string> tool_parser_names();

/// Streams one choice through a parser: content until a call may begin (text that could be
/// the start of a marker is held back), then the calls as vLLM sends them: a call whose name
/// the parser reads while it is written (pending_call) first gets a delta with its id and
/// name, then `function.arguments` fragments as its arguments grow, the rest once it
/// completes, so the fragments join to the non-streamed arguments; other calls get one
/// delta with id, name and arguments. finish() flushes the rest.
class ToolCallStreamer {
 public:
  explicit ToolCallStreamer(const ToolParser& parser) : parser_(parser) {}
  struct Delta {
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  Delta feed(std::string_view text);
  Delta finish();
  bool called() const { return sent_calls_ > 0 || named_ > 0; }

 private:
  Delta advance(bool final);

  const ToolParser& parser_;
  std::string text_;          // the whole output so far
  size_t content_sent_ = 0;   // bytes of text_ sent as content
  bool in_calls_ = false;     // a marker was seen at region_
  size_t region_ = 0;
  size_t sent_calls_ = 0;
  size_t named_ = 0;  // calls [0, named_) had their id and name sent (maybe ahead of their arguments)
  std::vector<std::string> args_sent_;  // per named call: the arguments text sent so far
};

}  // namespace troupe::openai
