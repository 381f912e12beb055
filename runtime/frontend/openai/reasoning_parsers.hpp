// vLLM's reasoning parsers (`--reasoning-parser NAME`): a model's output split into
// its reasoning (`reasoning_content`) and its answer (`content`), whole or as it
// streams. Built in: deepseek_r1 and qwen3, both <think>...</think>; the opening tag
// may be missing (templates that put it in the prompt). More are added by name with
// register_reasoning_parser (a runtime registry, as the tool parsers').
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "troupe/status.hpp"

namespace troupe::openai {

/// A whole output split; nullopt is vLLM's null (no reasoning, or no content after it).
struct ReasoningSplit {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
};

/// A parser of reasoning delimited by a start and an end text (<think>, </think>).
class ReasoningParser {
 public:
  virtual ~ReasoningParser() = default;
  virtual ReasoningSplit parse(const std::string& text) const = 0;
  virtual const std::string& start_tag() const = 0;
  virtual const std::string& end_tag() const = 0;
  /// Whether text before any tag is reasoning (the start tag was in the prompt); false:
  /// the output is content unless it opens the start tag itself.
  virtual bool starts_in_reasoning() const = 0;
};

/// Builds a parser for one request: `chat_template_kwargs` may switch reasoning off
/// (qwen3's enable_thinking false).
using ReasoningParserFactory =
    std::function<std::unique_ptr<ReasoningParser>(const nlohmann::ordered_json& chat_template_kwargs)>;

/// Adds a parser under `name` (replacing one of that name).
void register_reasoning_parser(const std::string& name, ReasoningParserFactory factory);
/// The parser named `name` for a request with these kwargs; not_found listing the known names.
Result<std::unique_ptr<ReasoningParser>> make_reasoning_parser(
    const std::string& name, const nlohmann::ordered_json& chat_template_kwargs = nlohmann::ordered_json::object());
/// The registered names, sorted.
std::vector<std::string> reasoning_parser_names();

/// Streams one choice through a parser: reasoning until the end tag, content after it.
/// Text that may be the start of a tag is held back until it is told apart; the tags
/// themselves are never sent. finish() flushes what is held back.
class ReasoningStreamer {
 public:
  explicit ReasoningStreamer(const ReasoningParser& parser);
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta feed(std::string_view text);
  Delta finish();
  bool in_reasoning() const { return phase_ != Phase::content; }

 private:
  enum class Phase { before, reasoning, content };
  void advance(Delta* out, bool final);

  const ReasoningParser& parser_;
  Phase phase_;
  std::string held_;       // not yet sent: may begin a tag
  bool saw_start_ = false;
};

}  // namespace troupe::openai
