#include "runtime/frontend/openai/partial_json.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <vector>

#include "runtime/frontend/openai/tools.hpp"

namespace troupe::openai {
namespace {

using ojson = nlohmann::ordered_json;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_scalar_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.';
}

// End of the string that starts at s[at] == '"', or npos.
size_t string_end(std::string_view s, size_t at) {
  for (size_t i = at + 1; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') return i + 1;
  }
  return std::string_view::npos;
}

std::string dump(const ojson& v) { return python_json_dumps(v); }

// Walks a value, appending its stable canonical text to `out`; a member returns false where
// the text ends or stops being JSON (nothing after that point is written).
struct Walker {
  std::string_view s;
  size_t i = 0;
  std::string out;

  bool more() {
    while (i < s.size() && is_ws(s[i])) ++i;
    return i < s.size();
  }

  bool value(int depth) {
    if (depth > 64 || !more()) return false;
    switch (s[i]) {
      case '{': return container(depth, '}');
      case '[': return container(depth, ']');
      case '"': return string();
      default: return scalar();
    }
  }

  bool container(int depth, char close) {
    const bool object = close == '}';
    out += s[i++];
    if (!more()) return false;
    if (s[i] == close) {
      out += s[i++];
      return true;
    }
    while (true) {
      if (object) {
        if (!more() || s[i] != '"') return false;
        const size_t end = string_end(s, i);
        if (end == std::string_view::npos) return false;
        const ojson key = ojson::parse(s.substr(i, end - i), nullptr, false);
        if (!key.is_string()) return false;
        i = end;
        if (!more() || s[i] != ':') return false;
        ++i;
        out += dump(key) + ": ";
      }
      if (!value(depth + 1) || !more()) return false;
      if (s[i] == ',') {
        ++i;
        out += ", ";
      } else if (s[i] == close) {
        out += s[i++];
        return true;
      } else {
        return false;
      }
    }
  }

  // The string's characters as they come: the raw bytes up to a point that ends a whole
  // character (escape, surrogate pair or UTF-8 sequence) are decoded and written again.
  bool string() {
    out += '"';
    const size_t begin = ++i;
    bool closed = false;
    while (i < s.size()) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"') {
        closed = true;
        break;
      }
      size_t need = 1;
      if (c == '\\') {
        need = 2;
        if (i + 1 < s.size() && s[i + 1] == 'u') {
          need = 6;
          if (i + 6 <= s.size()) {
            const unsigned long v = std::strtoul(std::string(s.substr(i + 2, 4)).c_str(), nullptr, 16);
            if (v >= 0xD800 && v <= 0xDBFF) need = 12;  // its low half must follow
          }
        }
      } else if (c >= 0x80) {
        need = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      }
      if (i + need > s.size()) break;
      i += need;
    }
    if (i > begin) {
      std::string quoted(1, '"');
      quoted.append(s.substr(begin, i - begin));
      quoted += '"';
      const ojson v = ojson::parse(quoted, nullptr, false);
      if (!v.is_string()) return false;
      const std::string d = dump(v);
      out.append(d, 1, d.size() - 2);
    }
    if (!closed) return false;
    ++i;
    out += '"';
    return true;
  }

  bool scalar() {
    const size_t begin = i;
    while (i < s.size() && is_scalar_char(s[i])) ++i;
    if (i == begin || i >= s.size()) return false;  // not JSON, or it may go on
    const ojson v = ojson::parse(s.substr(begin, i - begin), nullptr, false);
    if (v.is_discarded() || v.is_structured() || v.is_string()) return false;
    out += dump(v);
    return true;
  }
};

}  // namespace

size_t json_value_end(std::string_view s, size_t at) {
  if (at >= s.size()) return std::string_view::npos;
  const char c = s[at];
  if (c == '"') return string_end(s, at);
  if (c != '{' && c != '[') {
    size_t i = at;
    while (i < s.size() && is_scalar_char(s[i])) ++i;
    return i == at || i >= s.size() ? std::string_view::npos : i;
  }
  std::vector<char> closes;
  for (size_t i = at; i < s.size(); ++i) {
    const char x = s[i];
    if (x == '"') {
      const size_t end = string_end(s, i);
      if (end == std::string_view::npos) return end;
      i = end - 1;
    } else if (x == '{' || x == '[') {
      closes.push_back(x == '{' ? '}' : ']');
      if (closes.size() > 64) return std::string_view::npos;
    } else if (x == '}' || x == ']') {
      if (closes.empty() || closes.back() != x) return std::string_view::npos;
      closes.pop_back();
      if (closes.empty()) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string stable_json_prefix(std::string_view partial) {
  Walker w{partial, 0, {}};
  w.value(0);
  return std::move(w.out);
}

PartialJsonCall scan_json_call(std::string_view s, std::initializer_list<std::string_view> argument_keys) {
  PartialJsonCall call;
  size_t rank = argument_keys.size();  // preference of the arguments found so far
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < s.size() && is_ws(s[i])) ++i;
    return i < s.size();
  };
  if (!skip_ws() || s[i] != '{') return call;
  ++i;
  while (skip_ws()) {
    if (s[i] == '}') {
      call.complete = true;
      return call;
    }
    if (s[i] != '"') return call;
    const size_t key_end = string_end(s, i);
    if (key_end == std::string_view::npos) return call;
    const ojson key = ojson::parse(s.substr(i, key_end - i), nullptr, false);
    if (!key.is_string()) return call;
    i = key_end;
    if (!skip_ws() || s[i] != ':') return call;
    ++i;
    if (!skip_ws()) return call;
    const size_t start = i, end = json_value_end(s, i);
    const std::string k = key.get<std::string>();
    if (k == "name" && end != std::string_view::npos) {
      const ojson name = ojson::parse(s.substr(start, end - start), nullptr, false);
      if (name.is_string()) call.name = name.get<std::string>();
    }
    size_t r = 0;
    for (std::string_view a : argument_keys) {
      if (r < rank && k == a) {
        rank = r;
        call.arguments = s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      }
      ++r;
    }
    if (end == std::string_view::npos) return call;
    i = end;
    if (!skip_ws()) return call;
    if (s[i] == ',') ++i;
    else if (s[i] != '}') return call;
  }
  return call;
}

}  // namespace troupe::openai
