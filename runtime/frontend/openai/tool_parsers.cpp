#include "runtime/frontend/openai/tool_parsers.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "runtime/frontend/openai/partial_json.hpp"
#include "runtime/frontend/openai/tools.hpp"

namespace troupe::openai {
namespace {

// Parsed in order: the arguments keep the keys in the order the model wrote them, as
// vLLM's json.dumps does, so streamed fragments (written in that order) join to them.
using json = nlohmann::ordered_json;

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

// A call's arguments as vLLM writes them: json.dumps of the object (a string is kept).
std::string arguments_text(const json& args) {
  if (args.is_string()) return args.get<std::string>();
  return python_json_dumps(args.is_null() ? json::object() : args);
}

// The fixed part of a call's arguments written so far (objects and lists stream; a string
// or scalar, sent as its text or "{}", comes whole when the call completes).
std::string streamable_arguments(const std::optional<std::string_view>& args) {
  if (!args || args->empty() || ((*args)[0] != '{' && (*args)[0] != '[')) return {};
  return stable_json_prefix(*args);
}

// The last of the JSON call objects that start at `at` in `s`, separated by whitespace and
// `separator`: its index and what is written of it; nullopt when there is none or the
// text between them is not a call.
std::optional<ToolParser::PendingCall> last_json_call(std::string_view s, size_t at, char separator,
                                                      std::initializer_list<std::string_view> argument_keys) {
  while (at < s.size() && std::isspace(static_cast<unsigned char>(s[at]))) ++at;
  size_t index = 0;
  while (at < s.size() && s[at] == '{') {
    const size_t end = json_value_end(s, at);
    if (end != std::string_view::npos) {
      size_t next = end;
      while (next < s.size() && (std::isspace(static_cast<unsigned char>(s[next])) || s[next] == separator)) ++next;
      if (next < s.size() && s[next] == '{') {
        at = next;
        ++index;
        continue;
      }
    }
    const PartialJsonCall call = scan_json_call(s.substr(at, end == std::string_view::npos ? end : end - at), argument_keys);
    if (!call.name) return std::nullopt;
    return ToolParser::PendingCall{index, *call.name, streamable_arguments(call.arguments)};
  }
  return std::nullopt;
}

// {"name", <args_key>} objects to calls; false when one is not such an object.
bool calls_from(const json& list, std::initializer_list<const char*> args_keys, std::vector<ToolCall>* out) {
  for (const auto& o : list) {
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) return false;
    json args = json::object();
    for (const char* k : args_keys)
      if (o.contains(k)) {
        args = o[k];
        break;
      }
    out->push_back({make_tool_call_id(), o["name"].get<std::string>(), arguments_text(args)});
  }
  return true;
}

// Hermes (Qwen 2.5/3, SmolLM3, ...): <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one
// per call; the content is the text before the first; an unclosed last one still counts.
class HermesParser : public ToolParser {
 public:
  ParsedToolCalls parse(const std::string& text) const override {
    const std::string open = "<tool_call>", close = "</tool_call>";
    size_t first = text.find(open);
    if (first == std::string::npos) return {text, {}};
    std::vector<ToolCall> calls;
    size_t at = first;
    while (at != std::string::npos) {
      const size_t body = at + open.size();
      const size_t end = text.find(close, body);
      const json call = json::parse(trim(std::string_view(text).substr(body, end == std::string::npos ? std::string::npos : end - body)),
                                    nullptr, false);
      if (call.is_discarded() || !calls_from(json::array({call}), {"arguments"}, &calls)) return {text, {}};
      at = end == std::string::npos ? end : text.find(open, end + close.size());
    }
    ParsedToolCalls out;
    if (first > 0) out.content = text.substr(0, first);
    out.calls = std::move(calls);
    return out;
  }
  std::vector<std::string> markers() const override { return {"<tool_call>"}; }

  // The last call (calls are walked as parse() walks them), once the JSON string of its
  // "name" is complete, with its arguments so far.
  std::optional<PendingCall> pending_call(const std::string& region) const override {
    const std::string open = "<tool_call>", close = "</tool_call>";
    size_t index = 0;
    size_t at = region.find(open);
    while (at != std::string::npos) {
      const size_t body = at + open.size();
      const size_t end = region.find(close, body);
      const size_t next = end == std::string::npos ? end : region.find(open, end + close.size());
      if (next == std::string::npos) {
        const std::string_view text = std::string_view(region).substr(body, end == std::string::npos ? end : end - body);
        const PartialJsonCall call = scan_json_call(text, {"arguments"});
        if (!call.name) return std::nullopt;
        return PendingCall{index, *call.name, streamable_arguments(call.arguments)};
      }
      ++index;
      at = next;
    }
    return std::nullopt;
  }
};

// Llama 3.x JSON calls: the output is {"name", "parameters"} (or "arguments") objects,
// maybe after <|python_tag|>, separated by ';'.
class Llama3JsonParser : public ToolParser {
 public:
  ParsedToolCalls parse(const std::string& text) const override {
    std::string s = trim(text);
    const std::string tag = "<|python_tag|>";
    if (s.rfind(tag, 0) == 0) s = trim(s.substr(tag.size()));
    if (s.empty() || s[0] != '{') return {text, {}};
    std::vector<ToolCall> calls;
    size_t at = 0;
    while (at < s.size()) {
      // One object: its end is where its braces balance (outside strings).
      size_t end = object_end(s, at);
      if (end == std::string::npos) return {text, {}};
      const json call = json::parse(s.substr(at, end - at), nullptr, false);
      if (call.is_discarded() || !calls_from(json::array({call}), {"parameters", "arguments"}, &calls)) return {text, {}};
      at = end;
      while (at < s.size() && (std::isspace(static_cast<unsigned char>(s[at])) || s[at] == ';')) ++at;
      if (at < s.size() && s[at] != '{') return {text, {}};
    }
    return {std::nullopt, std::move(calls)};
  }
  std::vector<std::string> markers() const override { return {"<|python_tag|>", "{"}; }
  bool markers_anywhere() const override { return false; }
  std::optional<PendingCall> pending_call(const std::string& region) const override {
    const std::string tag = "<|python_tag|>";
    size_t start = region.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return std::nullopt;
    if (region.compare(start, tag.size(), tag) == 0) start += tag.size();
    return last_json_call(region, start, ';', {"parameters", "arguments"});
  }

 private:
  static size_t object_end(const std::string& s, size_t at) {
    int depth = 0;
    bool str = false, esc = false;
    for (size_t i = at; i < s.size(); ++i) {
      const char c = s[i];
      if (str) {
        if (esc) esc = false;
        else if (c == '\\') esc = true;
        else if (c == '"') str = false;
      } else if (c == '"') {
        str = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return i + 1;
      }
    }
    return std::string::npos;
  }
};

// Mistral: content, then [TOOL_CALLS] and a JSON list of {"name", "arguments"}.
class MistralParser : public ToolParser {
 public:
  ParsedToolCalls parse(const std::string& text) const override {
    const std::string tag = "[TOOL_CALLS]";
    const size_t at = text.find(tag);
    if (at == std::string::npos) return {text, {}};
    json list = json::parse(trim(std::string_view(text).substr(at + tag.size())), nullptr, false);
    if (list.is_object()) list = json::array({list});
    std::vector<ToolCall> calls;
    if (list.is_discarded() || !list.is_array() || !calls_from(list, {"arguments", "parameters"}, &calls))
      return {text, {}};
    ParsedToolCalls out;
    if (at > 0) out.content = text.substr(0, at);
    out.calls = std::move(calls);
    return out;
  }
  std::vector<std::string> markers() const override { return {"[TOOL_CALLS]"}; }
  std::optional<PendingCall> pending_call(const std::string& region) const override {
    const std::string tag = "[TOOL_CALLS]";
    size_t at = region.find(tag);
    if (at == std::string::npos) return std::nullopt;
    at = region.find_first_not_of(" \t\r\n", at + tag.size());
    if (at == std::string::npos) return std::nullopt;
    if (region[at] == '[') ++at;  // a list of calls, or one object
    return last_json_call(region, at, ',', {"arguments", "parameters"});
  }
};

// Pythonic (Llama 3.2/4 style): the whole output is a list of calls [f(a=1, b="x"), g()]
// whose arguments are Python literals (strings, numbers, True/False/None, lists, dicts).
class PythonicParser : public ToolParser {
 public:
  ParsedToolCalls parse(const std::string& text) const override {
    std::string s = trim(text);
    const std::string tag = "<|python_start|>", end_tag = "<|python_end|>";
    if (s.rfind(tag, 0) == 0) s = trim(s.substr(tag.size()));
    if (s.size() >= end_tag.size() && s.compare(s.size() - end_tag.size(), end_tag.size(), end_tag) == 0)
      s = trim(s.substr(0, s.size() - end_tag.size()));
    Reader r{s, 0};
    std::vector<ToolCall> calls;
    if (!r.eat('[')) return {text, {}};
    if (!r.eat(']')) {
      do {
        std::string name = r.identifier();
        if (name.empty() || !r.eat('(')) return {text, {}};
        json args = json::object();
        if (!r.eat(')')) {
          do {
            std::string key = r.identifier();
            json v;
            if (key.empty() || !r.eat('=') || !r.literal(&v)) return {text, {}};
            args[key] = std::move(v);
          } while (r.eat(','));
          if (!r.eat(')')) return {text, {}};
        }
        calls.push_back({make_tool_call_id(), name, python_json_dumps(args)});
      } while (r.eat(','));
      if (!r.eat(']')) return {text, {}};
    }
    r.ws();
    if (r.at != s.size() || calls.empty()) return {text, {}};
    return {std::nullopt, std::move(calls)};
  }
  std::vector<std::string> markers() const override { return {"<|python_start|>", "["}; }
  bool markers_anywhere() const override { return false; }

  // The last call once "name(" is written; its arguments grow by whole keyword arguments
  // (a value counts once the ',' or ')' after it is written).
  std::optional<PendingCall> pending_call(const std::string& region) const override {
    size_t start = region.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return std::nullopt;
    const std::string tag = "<|python_start|>";
    if (region.compare(start, tag.size(), tag) == 0) start += tag.size();
    Reader r{region, start};
    if (!r.eat('[')) return std::nullopt;
    std::optional<PendingCall> last;
    for (size_t index = 0;; ++index) {
      std::string name = r.identifier();
      r.ws();
      if (name.empty() || r.at >= region.size() || region[r.at] != '(') return last;
      ++r.at;
      PendingCall call{index, name, "{"};
      while (!r.eat(')')) {
        std::string key = r.identifier();
        json v;
        if (key.empty() || !r.eat('=') || !r.literal(&v)) return call;
        r.ws();
        if (r.at >= region.size() || (region[r.at] != ',' && region[r.at] != ')')) return call;
        call.arguments += (call.arguments.size() > 1 ? ", " : "") + python_json_dumps(json(key)) + ": " + python_json_dumps(v);
        r.eat(',');
      }
      call.arguments += '}';
      last = std::move(call);
      if (!r.eat(',')) return last;
    }
  }

 private:
  struct Reader {
    const std::string& s;
    size_t at;
    void ws() {
      while (at < s.size() && std::isspace(static_cast<unsigned char>(s[at]))) ++at;
    }
    bool eat(char c) {
      ws();
      if (at < s.size() && s[at] == c) return ++at, true;
      return false;
    }
    std::string identifier() {
      ws();
      size_t b = at;
      while (at < s.size() && (std::isalnum(static_cast<unsigned char>(s[at])) || s[at] == '_' ||
                               (s[at] == '.' && at > b)))
        ++at;
      if (b < s.size() && std::isdigit(static_cast<unsigned char>(s[b]))) return at = b, "";
      return s.substr(b, at - b);
    }
    bool literal(json* out, int depth = 0) {
      if (depth > 32) return false;
      ws();
      if (at >= s.size()) return false;
      const char c = s[at];
      if (c == '"' || c == '\'') {
        std::string v;
        for (++at; at < s.size() && s[at] != c; ++at) {
          if (s[at] == '\\' && at + 1 < s.size()) {
            const char e = s[++at];
            v += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          } else {
            v += s[at];
          }
        }
        if (at >= s.size()) return false;
        ++at;
        *out = v;
        return true;
      }
      if (c == '[' || c == '(') {
        const char close = c == '[' ? ']' : ')';
        ++at;
        *out = json::array();
        if (eat(close)) return true;
        do {
          json v;
          if (!literal(&v, depth + 1)) return false;
          out->push_back(std::move(v));
        } while (eat(',') && !(ws(), at < s.size() && s[at] == close));
        return eat(close);
      }
      if (c == '{') {
        ++at;
        *out = json::object();
        if (eat('}')) return true;
        do {
          json k, v;
          if (!literal(&k, depth + 1) || !k.is_string() || !eat(':') || !literal(&v, depth + 1)) return false;
          (*out)[k.get<std::string>()] = std::move(v);
        } while (eat(',') && !(ws(), at < s.size() && s[at] == '}'));
        return eat('}');
      }
      for (auto [word, value] : {std::pair{"True", json(true)}, std::pair{"False", json(false)}, std::pair{"None", json(nullptr)}}) {
        const std::string w = word;
        if (s.compare(at, w.size(), w) == 0) {
          at += w.size();
          *out = value;
          return true;
        }
      }
      size_t b = at;
      while (at < s.size() && (std::isdigit(static_cast<unsigned char>(s[at])) || std::string_view("+-.eE").find(s[at]) != std::string_view::npos))
        ++at;
      const json n = json::parse(s.substr(b, at - b), nullptr, false);
      if (b == at || n.is_discarded() || !n.is_number()) return false;
      *out = n;
      return true;
    }
  };
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, ToolParserFactory>& registry() {
  static std::map<std::string, ToolParserFactory> r = {
      {"hermes", [] { return std::make_unique<HermesParser>(); }},
      {"llama3_json", [] { return std::make_unique<Llama3JsonParser>(); }},
      {"mistral", [] { return std::make_unique<MistralParser>(); }},
      {"pythonic", [] { return std::make_unique<PythonicParser>(); }},
  };
  return r;
}

}  // namespace

void register_tool_parser(const std::string& name, ToolParserFactory factory) {
  std::lock_guard lock(registry_mutex());
  registry()[name] = std::move(factory);
}

std::vector<std::string> tool_parser_names() {
  std::lock_guard lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

Result<std::unique_ptr<ToolParser>> make_tool_parser(const std::string& name) {
  ToolParserFactory f;
  {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(name);
    if (it != registry().end()) f = it->second;
  }
  if (!f) {
    std::string known;
    for (const auto& n : tool_parser_names()) known += (known.empty() ? "" : ", ") + n;
    return not_found("tool call parser '" + name + "' is not registered (known: " + known + ")");
  }
  return f();
}

ToolCallStreamer::Delta ToolCallStreamer::feed(std::string_view text) {
  text_ += text;
  return advance(false);
}

ToolCallStreamer::Delta ToolCallStreamer::finish() { return advance(true); }

ToolCallStreamer::Delta ToolCallStreamer::advance(bool final) {
  Delta d;
  if (!in_calls_) {
    // Find a marker; hold back a tail that could still become one.
    const auto markers = parser_.markers();
    size_t hold = text_.size();
    if (parser_.markers_anywhere()) {
      for (const auto& m : markers) {
        const size_t at = text_.find(m, content_sent_);
        if (at != std::string::npos && at < hold) hold = at, in_calls_ = true;
      }
      if (!in_calls_ && !final) {
        for (const auto& m : markers)
          for (size_t k = std::min(m.size() - 1, text_.size() - content_sent_); k > 0; --k)
            if (text_.compare(text_.size() - k, k, m, 0, k) == 0) {
              hold = std::min(hold, text_.size() - k);
              break;
            }
      }
    } else {
      // Only at the start (whitespace aside): wait for the first other byte.
      const size_t first = text_.find_first_not_of(" \t\r\n");
      if (content_sent_ == 0) {
        if (first == std::string::npos) {
          hold = final ? text_.size() : 0;
        } else {
          bool prefix = false;
          for (const auto& m : markers) {
            const size_t n = std::min(m.size(), text_.size() - first);
            if (text_.compare(first, n, m, 0, n) == 0) {
              if (n == m.size()) in_calls_ = true, hold = 0;
              else prefix = true;
            }
          }
          if (prefix && !in_calls_) hold = final ? text_.size() : 0;
        }
      }
    }
    if (in_calls_) region_ = hold;
    if (hold > content_sent_) {
      d.content = text_.substr(content_sent_, hold - content_sent_);
      content_sent_ = hold;
    }
  }
  if (in_calls_) {
    // Arguments text of call i beyond what was sent, into this delta (with the call's
    // first delta when it is in this one).
    auto send_arguments = [&](size_t i, const std::string& args) {
      std::string& sent = args_sent_[i];
      if (args.size() <= sent.size() || args.compare(0, sent.size(), sent) != 0) return;
      const std::string more = args.substr(sent.size());
      sent = args;
      if (!d.calls.empty() && d.calls.back().index == static_cast<int>(i)) d.calls.back().arguments += more;
      else d.calls.push_back({static_cast<int>(i), std::nullopt, std::nullopt, more});
    };
    auto name_call = [&](size_t i, std::string id, std::string name) {
      d.calls.push_back({static_cast<int>(i), std::move(id), std::move(name), ""});
      named_ = i + 1;
      args_sent_.resize(named_);
    };
    // Calls complete while more may follow: send the ones a parse of the region finds
    // beyond those sent, except the last (it may still grow) until the end.
    const std::string region = text_.substr(region_);
    ParsedToolCalls p = parser_.parse(region);
    size_t ready = p.calls.size();
    if (!final && ready > 0) --ready;
    for (size_t i = sent_calls_; i < ready; ++i) {
      if (i >= named_) name_call(i, p.calls[i].id, p.calls[i].name);  // else its id and name went ahead
      send_arguments(i, p.calls[i].arguments);
    }
    sent_calls_ = std::max(sent_calls_, ready);
    // The call being written: its name as soon as it is written (vLLM sends it before the
    // arguments), then its arguments as far as they are fixed.
    if (!final) {
      auto pending = parser_.pending_call(region);
      if (pending && pending->index >= sent_calls_ && pending->index <= named_) {
        if (pending->index == named_) name_call(pending->index, make_tool_call_id(), pending->name);
        send_arguments(pending->index, pending->arguments);
      }
    }
    if (final && p.calls.empty() && content_sent_ < text_.size()) {
      // The region was no call after all: it is content.
      d.content += text_.substr(content_sent_);
      content_sent_ = text_.size();
    }
  }
  return d;
}

}  // namespace troupe::openai
