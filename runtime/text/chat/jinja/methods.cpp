// The sandbox's attribute lookup and the str/dict/list methods templates call.
#include <algorithm>
#include <set>

#include "runtime/text/chat/jinja/builtins.hpp"

namespace troupe::jinja::detail {
namespace {

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1f');
}

/// jinja2's object_type_repr: "dict object", "None", ...
std::string object_repr(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

Value missing_attr(const Value& obj, const std::string& what) {
  std::string hint = "'";  // built by appends: gcc 12 warns (-Wrestrict) on "'" + std::string&&
  hint.append(object_repr(obj)).append("' has no attribute ").append(what);
  return Value(Undefined{std::move(hint)});
}

std::vector<std::string> split_whitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t end = s.size();
      while (end > i && is_py_space(s[end - 1])) --end;
      out.push_back(s.substr(i, end - i));
      break;
    }
    size_t j = i;
    while (j < s.size() && !is_py_space(s[j])) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit) {
  if (sep.empty()) throw Error("ValueError: empty separator");
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t p = s.find(sep, start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {  // Python inserts `to` around every character
    std::string out;
    int64_t n = 0;
    for (const auto& ch : utf8_chars(s)) {
      if (count < 0 || n < count) out += to, ++n;
      out += ch;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t p = s.find(from, start);
    if (p == std::string::npos) break;
    out += s.substr(start, p - start) + to;
    start = p + from.size();
    ++n;
  }
  return out + s.substr(start);
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw Error("TypeError: " + std::string(prefix ? "startswith" : "endswith") +
                                    " first arg must be str or a tuple of str, not " + a.type_name());
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const auto& a : affix.as_list())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

/// str.format with "{}", "{0}" and "{name}" fields (no format specs).
std::string py_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{', ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}', ++i;
    } else if (c == '{') {
      const size_t end = fmt.find('}', i);
      if (end == std::string::npos) throw Error("ValueError: Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, end - i - 1);
      if (field.find_first_of(":!") != std::string::npos) throw Error("str.format: format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        if (auto_index >= a.positional.size()) throw Error("IndexError: Replacement index out of range for format");
        v = &a.positional[auto_index++];
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        const size_t k = std::stoul(field);
        if (k >= a.positional.size()) throw Error("IndexError: Replacement index out of range for format");
        v = &a.positional[k];
      } else {
        for (const auto& [name, val] : a.keyword)
          if (name == field) v = &val;
        if (!v) throw Error("KeyError: '" + field + "'");
      }
      out += v->str();
      i = end;
    } else if (c == '}') {
      throw Error("ValueError: Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

std::string title_case(const std::string& s) {  // Python's str.title (ASCII letters)
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha) c = prev_cased ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    prev_cased = alpha;
  }
  return out;
}

Value str_method(const std::string& s, const std::string& name) {
  auto bind = [&](auto fn) {
    return Value::function("str." + name, [s, fn](CallArgs& a) -> Value { return fn(s, a); });
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return bind([l, r](const std::string& s, CallArgs& a) { return Value(strip(s, arg(a, 0, "chars"), l, r)); });
  }
  if (name == "upper") return bind([](const std::string& s, CallArgs&) { return Value(ascii_upper(s)); });
  if (name == "lower") return bind([](const std::string& s, CallArgs&) { return Value(ascii_lower(s)); });
  if (name == "title") return bind([](const std::string& s, CallArgs&) { return Value(title_case(s)); });
  if (name == "capitalize")
    return bind([](const std::string& s, CallArgs&) {
      std::string out = ascii_lower(s);
      if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
      return Value(out);
    });
  if (name == "split" || name == "rsplit")
    return bind([rs = name == "rsplit"](const std::string& s, CallArgs& a) {
      const Value sep = arg(a, 0, "sep", Value(None{}));
      const Value max = arg(a, 1, "maxsplit", Value(int64_t{-1}));
      if (rs && max.as_int() >= 0) throw Error("str.rsplit with maxsplit is not supported");
      std::vector<std::string> parts =
          sep.is_none() ? split_whitespace(s, max.as_int()) : split_sep(s, sep.str(), max.as_int());
      ValueList l;
      for (auto& p : parts) l.emplace_back(std::move(p));
      return Value(std::move(l));
    });
  if (name == "splitlines")
    return bind([](const std::string& s, CallArgs&) {
      ValueList l;
      size_t start = 0;
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\n' || s[i] == '\r') {
          l.emplace_back(s.substr(start, i - start));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          start = i + 1;
        }
      if (start < s.size()) l.emplace_back(s.substr(start));
      return Value(std::move(l));
    });
  if (name == "startswith" || name == "endswith")
    return bind([p = name == "startswith"](const std::string& s, CallArgs& a) {
      return Value(affix_matches(s, arg(a, 0, "prefix"), p));
    });
  if (name == "replace")
    return bind([](const std::string& s, CallArgs& a) {
      return Value(replace_all(s, arg(a, 0, "old").str(), arg(a, 1, "new").str(),
                               arg(a, 2, "count", Value(int64_t{-1})).as_int()));
    });
  if (name == "format") return bind([](const std::string& s, CallArgs& a) { return Value(py_format(s, a)); });
  if (name == "join")
    return bind([](const std::string& s, CallArgs& a) {
      std::string out;
      bool first = true;
      for (const auto& x : arg(a, 0, "iterable").iterate()) {
        if (!x.is_string()) throw Error("TypeError: sequence item: expected str instance, " + x.type_name() + " found");
        if (!first) out += s;
        first = false;
        out += x.as_string();
      }
      return Value(out);
    });
  if (name == "find" || name == "rfind" || name == "count" || name == "index")
    return bind([name](const std::string& s, CallArgs& a) {
      const std::string sub = arg(a, 0, "sub").str();
      if (name == "count") {
        if (sub.empty()) return Value(utf8_length(s) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value(n);
      }
      const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (name == "index") throw Error("ValueError: substring not found");
        return Value(int64_t{-1});
      }
      return Value(utf8_length(s.substr(0, p)));
    });
  if (name == "removeprefix" || name == "removesuffix")
    return bind([pre = name == "removeprefix"](const std::string& s, CallArgs& a) {
      const std::string x = arg(a, 0, "prefix").str();
      if (affix_matches(s, Value(x), pre))
        return Value(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
      return Value(s);
    });
  static const std::set<std::string> predicates = {"isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  if (predicates.count(name))
    return bind([name](const std::string& s, CallArgs&) {
      if (s.empty()) return Value(false);
      bool cased = false;
      for (unsigned char c : s) {
        if (name == "isdigit" && !std::isdigit(c)) return Value(false);
        if (name == "isalpha" && !std::isalpha(c)) return Value(false);
        if (name == "isalnum" && !std::isalnum(c)) return Value(false);
        if (name == "isspace" && !is_py_space(static_cast<char>(c))) return Value(false);
        if (name == "islower" && std::isupper(c)) return Value(false);
        if (name == "isupper" && std::islower(c)) return Value(false);
        cased = cased || std::isalpha(c);
      }
      return Value(name == "islower" || name == "isupper" ? cased : true);
    });
  return Value(Undefined{});  // not a str method
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values")
    return Value::function("dict." + name, [d, name](CallArgs&) {
      ValueList l;
      for (const auto& [k, v] : d.as_dict().items) {
        if (name == "items") l.push_back(Value::tuple(ValueList{k, v}));
        else l.push_back(name == "keys" ? k : v);
      }
      return Value(std::move(l));
    });
  if (name == "get")
    return Value::function("dict.get", [d](CallArgs& a) {
      const Value* v = d.as_dict().find(arg(a, 0, "key"));
      return v ? *v : arg(a, 1, "default", Value(None{}));
    });
  if (name == "copy") return Value::function("dict.copy", [d](CallArgs&) { return d; });
  static const std::set<std::string> mutators = {"pop", "popitem", "setdefault", "update", "clear"};
  if (mutators.count(name)) return Value(Undefined{"access to attribute '" + name + "' of 'dict' object is unsafe."});
  return Value(Undefined{});
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "index" || name == "count")
    return Value::function("list." + name, [l, name](CallArgs& a) {
      const Value x = arg(a, 0, "value");
      int64_t n = 0, i = 0;
      for (const auto& v : l.as_list()) {
        if (v.equals(x)) {
          if (name == "index") return Value(i);
          ++n;
        }
        ++i;
      }
      if (name == "index") throw Error("ValueError: " + x.repr() + " is not in list");
      return Value(n);
    });
  static const std::set<std::string> mutators = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"};
  if (mutators.count(name)) return Value(Undefined{"access to attribute '" + name + "' of 'list' object is unsafe."});
  return Value(Undefined{});
}

/// Python's getattr(obj, name): a method, a namespace attribute, or Undefined (no hint) when none.
Value python_attr(const Value& obj, const std::string& name) {
  if (obj.is_string()) return str_method(obj.as_string(), name);
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  if (obj.is_namespace()) {
    const Value* v = obj.as_namespace().find(name);
    return v ? *v : Value(Undefined{});
  }
  return Value(Undefined{});
}

bool found(const Value& v) { return !v.is_undefined() || !v.undefined_hint().empty(); }

/// obj[key] as Python does it; Undefined (no hint) on a lookup or type error.
Value python_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(key);
    return v ? *v : Value(Undefined{});
  }
  if (((obj.is_list() && !obj.is_iterator()) || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t n = obj.length();
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value(Undefined{});
    if (obj.is_list()) return obj.as_list()[static_cast<size_t>(i)];
    return Value(utf8_chars(obj.as_string())[static_cast<size_t>(i)]);
  }
  return Value(Undefined{});
}

}  // namespace

Value arg(const CallArgs& a, size_t pos, const char* name, const Value& def) {
  if (pos < a.positional.size()) return a.positional[pos];
  for (const auto& [k, v] : a.keyword)
    if (k == name) return v;
  return def;
}

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    if (chars.is_undefined() || chars.is_none()) return is_py_space(c);
    return chars.str().find(c) != std::string::npos;  // ASCII strip sets
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_char(s[b])) ++b;
  if (right)
    while (e > b && strip_char(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw Error(obj.undefined_hint());
  Value v = python_attr(obj, name);
  if (found(v)) return v;
  v = python_item(obj, Value(name));
  if (found(v)) return v;
  return missing_attr(obj, string_repr(name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw Error(obj.undefined_hint());
  Value v = python_item(obj, key);
  if (found(v)) return v;
  if (key.is_string()) {
    v = python_attr(obj, key.as_string());
    if (found(v)) return v;
  }
  return missing_attr(obj, key.repr());
}

Value get_path(const Value& obj, const std::string& path) {
  Value v = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = get_item(v, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value call(const Value& fn, CallArgs& args) {
  if (fn.is_callable()) return fn.as_callable().fn(args);
  if (fn.is_undefined())
    throw Error(fn.undefined_hint().empty() ? std::string("'Undefined' object is not callable") : fn.undefined_hint());
  throw Error("'" + fn.type_name() + "' object is not callable");
}

}  // namespace troupe::jinja::detail
