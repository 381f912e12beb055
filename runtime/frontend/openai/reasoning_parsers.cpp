#include "runtime/frontend/openai/reasoning_parsers.hpp"

#include <algorithm>
#include <map>
#include <mutex>

namespace troupe::openai {
namespace {

// <think>...</think> as vLLM's thinking parsers read a whole output: reasoning up to
// the first end tag, content after it (empty content is null), the first start tag
// before it dropped (it may be missing: the template opened it in the prompt). Without
// an end tag the output is all reasoning (cut short while thinking). With reasoning off
// for the request (starts_in_reasoning false) the output is content unless it opens
// with the start tag. Text before a start tag counts as reasoning (vLLM drops it), so
// that a stream and the whole answer always agree.
class ThinkingParser final : public ReasoningParser {
 public:
  ThinkingParser(std::string start, std::string end, bool starts_in_reasoning)
      : start_(std::move(start)), end_(std::move(end)), starts_in_reasoning_(starts_in_reasoning) {}

  ReasoningSplit parse(const std::string& text) const override {
    if (starts_in_reasoning_) return split(text, /*saw_start=*/false);
    const size_t lead = text.find_first_not_of(" \t\r\n");
    if (lead == std::string::npos || text.compare(lead, start_.size(), start_) != 0) {
      if (text.empty()) return {};
      return {std::nullopt, text};
    }
    return split(text.substr(lead + start_.size()), /*saw_start=*/true);
  }
  const std::string& start_tag() const override { return start_; }
  const std::string& end_tag() const override { return end_; }
  bool starts_in_reasoning() const override { return starts_in_reasoning_; }

 private:
  ReasoningSplit split(const std::string& rest, bool saw_start) const {
    const size_t e = rest.find(end_);
    ReasoningSplit out;
    out.reasoning = e == std::string::npos ? rest : rest.substr(0, e);
    if (!saw_start)
      if (size_t s = out.reasoning->find(start_); s != std::string::npos) out.reasoning->erase(s, start_.size());
    if (e != std::string::npos && e + end_.size() < rest.size()) out.content = rest.substr(e + end_.size());
    return out;
  }

  std::string start_, end_;
  bool starts_in_reasoning_;
};

// qwen3: thinking unless the request's chat_template_kwargs say enable_thinking false
// (Qwen3's template then writes an empty <think></think> into the prompt).
bool thinking_enabled(const nlohmann::ordered_json& kwargs) {
  if (!kwargs.is_object()) return true;
  auto it = kwargs.find("enable_thinking");
  return it == kwargs.end() || !it->is_boolean() || it->get<bool>();
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, ReasoningParserFactory>& registry() {
  static std::map<std::string, ReasoningParserFactory> r = {
      {"deepseek_r1",
       [](const nlohmann::ordered_json&) { return std::make_unique<ThinkingParser>("<think>", "</think>", true); }},
      {"qwen3",
       [](const nlohmann::ordered_json& kwargs) {
         return std::make_unique<ThinkingParser>("<think>", "</think>", thinking_enabled(kwargs));
       }},
  };
  return r;
}

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

void register_reasoning_parser(const std::string& name, ReasoningParserFactory factory) {
  std::lock_guard lock(registry_mutex());
  registry()[name] = std::move(factory);
}

std::vector<std::string> reasoning_parser_names() {
  std::lock_guard lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

Result<std::unique_ptr<ReasoningParser>> make_reasoning_parser(const std::string& name,
                                                               const nlohmann::ordered_json& chat_template_kwargs) {
  ReasoningParserFactory f;
  {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(name);
    if (it != registry().end()) f = it->second;
  }
  if (!f) {
    std::string known;
    for (const auto& n : reasoning_parser_names()) known += (known.empty() ? "" : ", ") + n;
    return not_found("reasoning parser '" + name + "' is not registered (known: " + known + ")");
  }
  return f(chat_template_kwargs);
}

ReasoningStreamer::ReasoningStreamer(const ReasoningParser& parser)
    : parser_(parser), phase_(parser.starts_in_reasoning() ? Phase::reasoning : Phase::before) {}

ReasoningStreamer::Delta ReasoningStreamer::feed(std::string_view text) {
  held_.append(text);
  Delta out;
  advance(&out, false);
  return out;
}

ReasoningStreamer::Delta ReasoningStreamer::finish() {
  Delta out;
  advance(&out, true);
  return out;
}

void ReasoningStreamer::advance(Delta* out, bool final) {
  const std::string& start = parser_.start_tag();
  const std::string& end = parser_.end_tag();
  for (;;) {
    if (phase_ == Phase::content) {
      out->content += held_;
      held_.clear();
      return;
    }
    if (phase_ == Phase::before) {
      // Reasoning is off unless the output opens with the start tag (whitespace aside).
      const size_t lead = held_.find_first_not_of(" \t\r\n");
      if (lead == std::string::npos) {
        if (!final) return;
        phase_ = Phase::content;
        continue;
      }
      std::string_view rest = std::string_view(held_).substr(lead);
      if (rest.substr(0, start.size()) == start) {
        held_ = held_.substr(lead + start.size());
        saw_start_ = true;
        phase_ = Phase::reasoning;
        continue;
      }
      if (!final && rest.size() < start.size() && start.compare(0, rest.size(), rest) == 0) return;
      phase_ = Phase::content;
      continue;
    }
    // Reasoning: drop the first start tag before the end tag, switch at the end tag.
    const size_t e = held_.find(end);
    if (!saw_start_) {
      const size_t s = held_.find(start);
      if (s != std::string::npos && (e == std::string::npos || s < e)) {
        out->reasoning += held_.substr(0, s);
        held_ = held_.substr(s + start.size());
        saw_start_ = true;
        continue;
      }
    }
    if (e != std::string::npos) {
      out->reasoning += held_.substr(0, e);
      held_ = held_.substr(e + end.size());
      phase_ = Phase::content;
      continue;
    }
    size_t keep = final ? 0 : partial_tag_suffix(held_, end);
    if (!final && !saw_start_) keep = std::max(keep, partial_tag_suffix(held_, start));
    out->reasoning += held_.substr(0, held_.size() - keep);
    held_ = held_.substr(held_.size() - keep);
    return;
  }
}

}  // namespace troupe::openai
