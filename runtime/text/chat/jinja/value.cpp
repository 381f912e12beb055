#include "runtime/text/chat/jinja/value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/text/json/python_json.hpp"

namespace troupe::jinja {

const Value* ValueDict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (k.equals(key)) return &v;
  return nullptr;
}

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void ValueDict::set(Value key, Value value) {
  for (auto& [k, v] : items)
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::function(std::string name, std::function<Value(CallArgs&)> fn) {
  return Value(std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
}

std::string Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return seq_ == Seq::tuple ? "tuple" : seq_ == Seq::iterator ? "generator" : "list";
  if (is_dict()) return "dict";
  if (is_namespace()) return "Namespace";
  return "function";
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_float() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return is_iterator() || !as_list().empty();
  if (is_dict()) return !as_dict().items.empty();
  return true;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return json_io::python_float_repr(d);  // Python's repr of a finite float
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return float_repr(as_float());
  if (is_string()) return as_string();
  return repr();
}

std::string Value::repr() const {
  if (is_undefined()) return "Undefined";
  if (is_string()) return string_repr(as_string());
  if (is_iterator()) return "<generator object>";
  if (is_list()) {
    const bool tuple_ = is_tuple();
    std::string out = tuple_ ? "(" : "[";
    bool first = true;
    for (const auto& x : as_list()) {
      if (!first) out += ", ";
      first = false;
      out += x.repr();
    }
    if (tuple_ && as_list().size() == 1) out += ",";
    return out + (tuple_ ? ")" : "]");
  }
  if (is_dict() || is_namespace()) {
    const ValueDict& d = is_dict() ? as_dict() : as_namespace();
    std::string out = is_dict() ? "{" : "<Namespace {";
    bool first = true;
    for (const auto& [k, v] : d.items) {
      if (!first) out += ", ";
      first = false;
      out += k.repr() + ": " + v.repr();
    }
    return out + (is_dict() ? "}" : "}>");
  }
  if (is_callable()) return "<function " + as_callable().name + ">";
  return str();
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_float() || o.is_float()) return as_float() == o.as_float();
    return as_int() == o.as_int();
  }
  if (v_.index() != o.v_.index()) return false;
  if (is_undefined() || is_none()) return true;
  if (is_string()) return as_string() == o.as_string();
  if (is_list()) {
    const auto &a = as_list(), &b = o.as_list();
    if (is_iterator() || o.is_iterator()) return std::get<List>(v_) == std::get<List>(o.v_);
    if (a.size() != b.size() || seq_ != o.seq_) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].equals(b[i])) return false;
    return true;
  }
  if (is_dict()) {
    const auto &a = as_dict(), &b = o.as_dict();
    if (a.items.size() != b.items.size()) return false;
    for (const auto& [k, v] : a.items) {
      const Value* w = b.find(k);
      if (!w || !v.equals(*w)) return false;
    }
    return true;
  }
  if (is_namespace()) return std::get<Namespace>(v_) == std::get<Namespace>(o.v_);
  return std::get<Function>(v_) == std::get<Function>(o.v_);
}

bool Value::less(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_float() || o.is_float()) return as_float() < o.as_float();
    return as_int() < o.as_int();
  }
  if (is_string() && o.is_string()) return as_string() < o.as_string();  // UTF-8 bytes order as code points
  if (is_list() && o.is_list()) {
    const auto &a = as_list(), &b = o.as_list();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i].equals(b[i])) continue;
      return a[i].less(b[i]);
    }
    return a.size() < b.size();
  }
  if (is_undefined() || o.is_undefined()) throw Error(is_undefined() ? undefined_hint() : o.undefined_hint());
  throw Error("'<' not supported between instances of '" + type_name() + "' and '" + o.type_name() + "'");
}

ValueList Value::iterate() const {
  if (is_list()) return as_list();
  if (is_undefined()) return {};
  if (is_dict() || is_namespace()) {
    ValueList keys;
    for (const auto& kv : (is_dict() ? as_dict() : as_namespace()).items) keys.push_back(kv.first);
    return keys;
  }
  if (is_string()) {
    ValueList chars;
    for (auto& c : utf8_chars(as_string())) chars.emplace_back(std::move(c));
    return chars;
  }
  throw Error("'" + type_name() + "' object is not iterable");
}

int64_t Value::length() const {
  if (is_undefined()) return 0;
  if (is_string()) return utf8_length(as_string());
  if (is_list() && !is_iterator()) return static_cast<int64_t>(as_list().size());
  if (is_dict()) return static_cast<int64_t>(as_dict().items.size());
  throw Error("object of type '" + type_name() + "' has no len()");
}

int64_t utf8_length(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<double>(u)) : Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json(x));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;
      d.items.reserve(j.size());
      for (const auto& [k, v] : j.items()) d.items.emplace_back(Value(k), from_json(v));
      return Value(std::move(d));
    }
    default: throw Error("unsupported JSON value (binary or discarded)");
  }
}

namespace {

void json_string(const std::string& s, std::string& out) { out += json_io::python_json_string(s); }

std::string json_key(const Value& k) {
  if (k.is_string()) return k.as_string();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int() || k.is_float()) return k.str();
  throw Error("keys must be str, int, float, bool or None, not " + k.type_name());
}

void dump(const Value& v, int indent, bool sort_keys, const std::string& item_sep, const std::string& key_sep, int level,
          std::string& out) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_float();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
  } else if (v.is_string()) {
    json_string(v.as_string(), out);
  } else if (v.is_list() && !v.is_iterator()) {
    const auto& l = v.as_list();
    if (l.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += item_sep;
      newline(level + 1);
      dump(l[i], indent, sort_keys, item_sep, key_sep, level + 1, out);
    }
    newline(level);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<std::pair<std::string, const Value*>> items;
    for (const auto& [k, x] : v.as_dict().items) items.emplace_back(json_key(k), &x);
    if (items.empty()) {
      out += "{}";
      return;
    }
    if (sort_keys)
      std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      newline(level + 1);
      json_string(items[i].first, out);
      out += key_sep;
      dump(*items[i].second, indent, sort_keys, item_sep, key_sep, level + 1, out);
    }
    newline(level);
    out += '}';
  } else {
    throw Error("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, int indent, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep) {
  std::string out;
  dump(v, indent, sort_keys, item_sep, key_sep, 0, out);
  return out;
}

}  // namespace troupe::jinja
