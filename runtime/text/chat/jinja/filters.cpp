// jinja2's built-in filters and tests (the ones chat templates use), transformers'
// tojson, and the environment's globals.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "runtime/text/chat/jinja/builtins.hpp"

namespace troupe::jinja::detail {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox MAX_RANGE

/// json.dumps(ensure_ascii=True): non-ASCII code points as \\uXXXX (UTF-16, surrogate pairs).
/// Applied to the ensure_ascii=False text, where non-ASCII bytes only occur inside strings.
std::string ascii_escape_json(const std::string& s) {
  std::string out;
  char buf[16];
  for (const auto& ch : utf8_chars(s)) {
    const auto b = static_cast<unsigned char>(ch[0]);
    if (b < 0x80) {
      out += ch;
      continue;
    }
    const int n = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
    uint32_t cp = b & (0x3F >> n);
    for (int i = 1; i <= n && i < static_cast<int>(ch.size()); ++i) cp = (cp << 6) | (static_cast<unsigned char>(ch[i]) & 0x3F);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

/// jinja2's title filter: each piece between runs of whitespace, '-', '(', '{', '[' and '<'
/// gets its first character upper-cased and the rest lower-cased (unlike str.title).
std::string title_words(const std::string& s) {
  auto boundary = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '-' || c == '(' ||
           c == '{' || c == '[' || c == '<';
  };
  std::string out;
  bool start = true;
  for (char c : s) {
    if (boundary(c)) {
      out += c;
      start = true;
    } else {
      out += static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      start = false;
    }
  }
  return out;
}

/// Python's \w for one code point: ASCII letters, digits and '_'; beyond ASCII, letters
/// and digits approximated as everything but the common punctuation and symbol blocks.
bool is_word_char(const std::string& ch) {
  const auto b = static_cast<unsigned char>(ch[0]);
  if (b < 0x80) return std::isalnum(b) || b == '_';
  uint32_t cp = 0;
  const int n = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
  cp = b & (0x3F >> n);
  for (int i = 1; i <= n && i < static_cast<int>(ch.size()); ++i) cp = (cp << 6) | (static_cast<unsigned char>(ch[i]) & 0x3F);
  if (cp < 0xC0) return cp == 0xAA || cp == 0xB5 || cp == 0xBA || cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE);
  if (cp == 0xD7 || cp == 0xF7) return false;
  if (cp >= 0x2000 && cp <= 0x2BFF) return false;   // punctuation, symbols, arrows, dingbats
  if (cp >= 0x3000 && cp <= 0x303F) return false;   // CJK punctuation
  if (cp >= 0xFE00 && cp <= 0xFE0F) return false;   // variation selectors
  if (cp >= 0xFF00 && cp <= 0xFF0F) return false;   // fullwidth punctuation
  if (cp >= 0x1F000 && cp <= 0x1FAFF) return false; // emoji and pictographs
  if (cp >= 0xE000 && cp <= 0xF8FF) return false;   // private use
  return true;
}

Value int_value(const Value& v, const Value& def) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return Value(static_cast<int64_t>(std::trunc(v.as_float())));
  if (v.is_string()) {
    std::string s = strip(v.as_string(), Value(), true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == 0 && errno == 0) return Value(static_cast<int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);  // jinja2 falls back to int(float(value))
    if (!s.empty() && *end == 0 && std::isfinite(d)) return Value(static_cast<int64_t>(std::trunc(d)));
  }
  return def;
}

Value float_value(const Value& v, const Value& def) {
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    const std::string s = strip(v.as_string(), Value(), true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == 0) return Value(d);
  }
  return def;
}

/// Python's round(x, ndigits): round-half-even on the exact binary value, as printf rounds.
double py_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits < 0) {
    const double p = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
  return std::strtod(buf, nullptr);
}

std::string indent(const std::string& s_in, const Value& width, bool first, bool blank) {
  const std::string ind = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  std::string s = s_in + "\n";
  std::vector<std::string> lines;  // str.splitlines on \n and \r\n (the forms templates hold)
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  if (start < s.size()) lines.push_back(s.substr(start));
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv.append("\n").append(ind);
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv.append(ind).append(lines[i]);
    }
  }
  return first ? ind + rv : rv;
}

/// jinja2's sort/unique key: strings lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive, const std::string& attribute) {
  Value k = attribute.empty() ? v : get_path(v, attribute);
  if (!case_sensitive && k.is_string()) return Value(ascii_lower(k.as_string()));
  return k;
}

/// select/reject/selectattr/rejectattr: args after `skip` positional args name the test.
Value select(const Value& seq, CallArgs& a, bool attr, bool keep) {
  std::string attribute;
  size_t next = 0;
  if (attr) attribute = arg(a, next++, "attribute").str();
  CallArgs test_args;
  std::string test_name;
  if (a.positional.size() > next) {
    test_name = a.positional[next].str();
    test_args.positional.assign(a.positional.begin() + static_cast<long>(next) + 1, a.positional.end());
  }
  ValueList out;
  if (!seq.truthy()) return Value::iterator({});  // jinja2: "if value: for item in value"
  for (const auto& item : seq.iterate()) {
    const Value v = attr ? get_path(item, attribute) : item;
    CallArgs ta = test_args;
    const bool ok = test_name.empty() ? v.truthy() : test(test_name, v, ta);
    if (ok == keep) out.push_back(item);
  }
  return Value::iterator(std::move(out));
}

Value map_filter(const Value& seq, CallArgs& a) {
  ValueList out;
  if (!seq.truthy()) return Value::iterator({});
  bool by_attribute = false;
  std::string attribute;
  Value def;
  for (const auto& [k, v] : a.keyword) {
    if (k == "attribute") by_attribute = true, attribute = v.str();
    if (k == "default") def = v;
  }
  if (by_attribute) {
    for (const auto& item : seq.iterate()) {
      Value v = get_path(item, attribute);
      out.push_back(v.is_undefined() && !def.is_undefined() ? def : v);
    }
    return Value::iterator(std::move(out));
  }
  if (a.positional.empty()) throw Error("map: expects a filter name or attribute=");
  const std::string name = a.positional[0].str();
  for (const auto& item : seq.iterate()) {
    CallArgs fa;
    fa.positional.assign(a.positional.begin() + 1, a.positional.end());
    out.push_back(filter(name, item, fa));
  }
  return Value::iterator(std::move(out));
}

Value number_sum(const ValueList& items, Value start) {
  Value acc = std::move(start);
  for (const auto& x : items) {
    if (!acc.is_number() || !x.is_number()) throw Error("sum: unsupported operand types " + acc.type_name() + " and " + x.type_name());
    acc = acc.is_float() || x.is_float() ? Value(acc.as_float() + x.as_float()) : Value(acc.as_int() + x.as_int());
  }
  return acc;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) throw Error("TypeError: 'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return container.as_dict().find(item) != nullptr;
  if (container.is_list()) {
    for (const auto& x : container.as_list())
      if (x.equals(item)) return true;
    return false;
  }
  if (container.is_undefined()) return false;
  throw Error("TypeError: argument of type '" + container.type_name() + "' is not iterable");
}

Value filter(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "tojson") {
    // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    const Value ind = arg(a, 1, "indent", Value(None{}));
    const bool sort_keys = arg(a, 3, "sort_keys", Value(false)).truthy();
    const Value seps = arg(a, 2, "separators", Value(None{}));
    const int indent_n = ind.is_none() ? -1 : static_cast<int>(ind.as_int());
    std::string item_sep = indent_n < 0 ? ", " : ",", key_sep = ": ";
    if (seps.is_list() && seps.as_list().size() == 2) item_sep = seps.as_list()[0].str(), key_sep = seps.as_list()[1].str();
    std::string out = to_json(v, indent_n, sort_keys, item_sep, key_sep);
    return Value(arg(a, 0, "ensure_ascii", Value(false)).truthy() ? ascii_escape_json(out) : out);
  }
  if (name == "safe") return v.is_markup() ? v : Value::markup(v.str());
  if (name == "string") return v.is_markup() ? v : Value(v.str());
  if (name == "trim") {
    std::string t = strip(v.str(), arg(a, 0, "chars"), true, true);
    return v.is_markup() ? Value::markup(std::move(t)) : Value(std::move(t));
  }
  if (name == "length" || name == "count") return Value(v.length());
  if (name == "upper") return Value(ascii_upper(v.str()));
  if (name == "lower") return Value(ascii_lower(v.str()));
  if (name == "title") return Value(title_words(v.str()));
  if (name == "capitalize") {
    CallArgs none;
    return call(get_attr(Value(v.str()), name), none);
  }
  if (name == "replace") {
    CallArgs ra;
    ra.positional = {arg(a, 0, "old"), arg(a, 1, "new"), arg(a, 2, "count", Value(int64_t{-1}))};
    if (ra.positional[2].is_none()) ra.positional[2] = Value(int64_t{-1});
    ra.positional[0] = Value(ra.positional[0].str());
    ra.positional[1] = Value(ra.positional[1].str());
    return call(get_attr(Value(v.str()), "replace"), ra);
  }
  if (name == "join") {
    const std::string sep = arg(a, 0, "d", Value("")).str();
    const Value attribute = arg(a, 1, "attribute", Value(None{}));
    std::string out;
    bool first = true;
    for (const auto& x : v.iterate()) {
      if (!first) out += sep;
      first = false;
      out += (attribute.is_none() ? x : get_path(x, attribute.str())).str();
    }
    return Value(out);
  }
  if (name == "default" || name == "d") {
    const Value def = arg(a, 0, "default_value", Value(""));
    const bool boolean = arg(a, 1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return def;
    return v;
  }
  if (name == "first" || name == "last") {
    if (name == "last" && v.is_iterator()) throw Error("TypeError: 'generator' object is not reversible");
    const ValueList items = v.iterate();
    if (items.empty()) return Value(Undefined{name == "first" ? "No first item, sequence was empty." : "No last item, sequence was empty."});
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(v.iterate());
  if (name == "selectattr" || name == "rejectattr") return select(v, a, true, name == "selectattr");
  if (name == "select" || name == "reject") return select(v, a, false, name == "select");
  if (name == "map") return map_filter(v, a);
  if (name == "items") {
    if (v.is_undefined()) return Value::iterator({});
    if (!v.is_dict()) throw Error("items: can only get item pairs from a mapping, not " + v.type_name());
    ValueList l;
    for (const auto& [k, x] : v.as_dict().items) l.push_back(Value::tuple(ValueList{k, x}));
    return Value::iterator(std::move(l));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) throw Error("dictsort: expects a mapping, got " + v.type_name());
    const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
    const std::string by = arg(a, 1, "by", Value("key")).str();
    const bool rev = arg(a, 2, "reverse", Value(false)).truthy();
    ValueList l;
    for (const auto& [k, x] : v.as_dict().items) l.push_back(Value::tuple(ValueList{k, x}));
    const size_t pos = by == "value" ? 1 : 0;
    std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
      const Value kp = sort_key(p.as_list()[pos], cs, ""), kq = sort_key(q.as_list()[pos], cs, "");
      return rev ? kq.less(kp) : kp.less(kq);
    });
    return Value(std::move(l));
  }
  if (name == "int") return int_value(v, arg(a, 0, "default", Value(int64_t{0})));
  if (name == "float") return float_value(v, arg(a, 0, "default", Value(0.0)));
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (v.is_number()) return Value(static_cast<int64_t>(std::llabs(v.as_int())));
    throw Error("TypeError: bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") {
    const int64_t precision = arg(a, 0, "precision", Value(int64_t{0})).as_int();
    const std::string method = arg(a, 1, "method", Value("common")).str();
    if (!v.is_number()) throw Error("round: expects a number, got " + v.type_name());
    const double x = v.as_float(), p = std::pow(10.0, static_cast<double>(precision));
    if (method == "common") return v.is_float() ? Value(py_round(x, precision)) : Value(v.as_int());
    if (method == "ceil") return Value(std::ceil(x * p) / p);
    if (method == "floor") return Value(std::floor(x * p) / p);
    throw Error("round: method must be common, ceil or floor");
  }
  if (name == "indent")
    return Value(indent(v.str(), arg(a, 0, "width", Value(int64_t{4})), arg(a, 1, "first", Value(false)).truthy(),
                        arg(a, 2, "blank", Value(false)).truthy()));
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (const auto& ch : utf8_chars(v.str())) {
      const bool w = is_word_char(ch);
      n += w && !in_word;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "unique") {
    const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
    const Value attribute = arg(a, 1, "attribute", Value(None{}));
    ValueList out, seen;
    for (const auto& x : v.iterate()) {
      const Value k = sort_key(x, cs, attribute.is_none() ? "" : attribute.str());
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(k); })) continue;
      seen.push_back(k);
      out.push_back(x);
    }
    return Value::iterator(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value(out);
    }
    // jinja2 returns reversed(value) (an iterator) when it can, else a reversed list
    ValueList l = v.iterate();
    std::reverse(l.begin(), l.end());
    return v.is_list() && !v.is_iterator() ? Value::iterator(std::move(l)) : Value(std::move(l));
  }
  if (name == "sort") {
    const bool rev = arg(a, 0, "reverse", Value(false)).truthy();
    const bool cs = arg(a, 1, "case_sensitive", Value(false)).truthy();
    const Value attribute = arg(a, 2, "attribute", Value(None{}));
    const std::string attr = attribute.is_none() ? "" : attribute.str();
    ValueList l = v.iterate();
    std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
      const Value kp = sort_key(p, cs, attr), kq = sort_key(q, cs, attr);
      return rev ? kq.less(kp) : kp.less(kq);
    });
    return Value(std::move(l));
  }
  if (name == "max" || name == "min") {
    const ValueList l = v.iterate();
    if (l.empty()) return Value(Undefined{"No aggregated item, sequence was empty."});
    const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
    const Value attribute = arg(a, 1, "attribute", Value(None{}));
    const std::string attr = attribute.is_none() ? "" : attribute.str();
    const Value* best = &l[0];
    for (const auto& x : l) {
      const Value kx = sort_key(x, cs, attr), kb = sort_key(*best, cs, attr);
      if (name == "max" ? kb.less(kx) : kx.less(kb)) best = &x;
    }
    return *best;
  }
  if (name == "sum") {
    const Value attribute = arg(a, 0, "attribute", Value(None{}));
    ValueList items = v.iterate();
    if (!attribute.is_none())
      for (auto& x : items) x = get_path(x, attribute.str());
    return number_sum(items, arg(a, 1, "start", Value(int64_t{0})));
  }
  if (name == "attr") return get_attr(v, arg(a, 0, "name").str());
  if (name == "escape" || name == "e") return v.is_markup() ? v : Value::markup(html_escape(v.str()));
  if (name == "forceescape") return Value::markup(html_escape(v.str()));
  if (name == "center") {
    const int64_t width = arg(a, 0, "width", Value(int64_t{80})).as_int();
    const std::string s = v.str();
    const int64_t len = utf8_length(s);
    if (len >= width) return Value(s);
    const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
  }
  throw Error("no filter named '" + name + "'");
}

bool test(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined() || v.is_namespace();
  if (name == "sequence") return (v.is_list() && !v.is_iterator()) || v.is_dict() || v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "lower" || name == "upper") {
    const std::string s = v.str();
    return s == (name == "lower" ? ascii_lower(s) : ascii_upper(s));
  }
  if (name == "odd" || name == "even") {
    if (!v.is_number() || v.is_float()) throw Error("test '" + name + "' expects an integer, got " + v.type_name());
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value d = arg(a, 0, "num");
    if (d.as_int() == 0) throw Error("ZeroDivisionError: integer modulo by zero");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "in") return contains(arg(a, 0, "seq"), v);
  const Value other = arg(a, 0, "b");
  if (name == "eq" || name == "equalto" || name == "==") return v.equals(other);
  if (name == "ne" || name == "!=") return !v.equals(other);
  if (name == "lt" || name == "lessthan" || name == "<") return v.less(other);
  if (name == "gt" || name == "greaterthan" || name == ">") return other.less(v);
  if (name == "le" || name == "<=") return !other.less(v);
  if (name == "ge" || name == ">=") return !v.less(other);
  if (name == "sameas") return v.equals(other) && v.type_name() == other.type_name();
  throw Error("no test named '" + name + "'");
}

ValueDict make_globals(std::time_t now) {
  ValueDict g;
  g.set(Value("raise_exception"), Value::function("raise_exception", [](CallArgs& a) -> Value {
          throw RaisedError(arg(a, 0, "message").str());
        }));
  g.set(Value("strftime_now"), Value::function("strftime_now", [now](CallArgs& a) -> Value {
          const std::string fmt = arg(a, 0, "format").str();
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[512];
          const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
          if (n == 0 && !fmt.empty()) throw Error("strftime_now: cannot format '" + fmt + "'");
          return Value(std::string(buf, n));
        }));
  g.set(Value("range"), Value::function("range", [](CallArgs& a) -> Value {
          int64_t start = 0, stop = 0, step = 1;
          if (a.positional.size() == 1) stop = a.positional[0].as_int();
          else if (a.positional.size() >= 2) start = a.positional[0].as_int(), stop = a.positional[1].as_int();
          if (a.positional.size() >= 3) step = a.positional[2].as_int();
          if (step == 0) throw Error("ValueError: range() arg 3 must not be zero");
          ValueList l;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (static_cast<int64_t>(l.size()) >= kMaxRange)
              throw Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            l.emplace_back(i);
          }
          return Value(std::move(l));
        }));
  g.set(Value("dict"), Value::function("dict", [](CallArgs& a) -> Value {
          ValueDict d;
          if (!a.positional.empty() && a.positional[0].is_dict()) d = a.positional[0].as_dict();
          for (const auto& [k, v] : a.keyword) d.set(Value(k), v);
          return Value(std::move(d));
        }));
  g.set(Value("namespace"), Value::function("namespace", [](CallArgs& a) -> Value {
          auto ns = std::make_shared<ValueDict>();
          if (!a.positional.empty() && a.positional[0].is_dict()) *ns = a.positional[0].as_dict();
          for (const auto& [k, v] : a.keyword) ns->set(Value(k), v);
          return Value(ns);
        }));
  return g;
}

}  // namespace troupe::jinja::detail
