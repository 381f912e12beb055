#include "runtime/rank/structured/json_lexemes.hpp"

#include <cstdio>

#include "runtime/rank/structured/json_formats.hpp"
#include "runtime/text/json/python_json.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"

namespace troupe::structured {
namespace {

ExprId hex_digit(ExprStore& s) {
  ByteSet h = ByteSet::range('0', '9');
  h.add_range('a', 'f');
  h.add_range('A', 'F');
  return s.bytes(h);
}

// Both letter cases of the hex digits of `v` (two digits).
ExprId hex_byte_any_case(ExprStore& s, uint32_t v) {
  const char* digits = "0123456789abcdef";
  ExprId parts[2];
  for (int i = 0; i < 2; ++i) {
    char d = digits[(v >> (4 * (1 - i))) & 15];
    ByteSet set;
    set.add(static_cast<uint8_t>(d));
    if (d >= 'a') set.add(static_cast<uint8_t>(d - 32));
    parts[i] = s.bytes(set);
  }
  return s.concat(parts);
}

}  // namespace

JsonLexemes::JsonLexemes(ExprStore& store, ExprId whitespace) : s_(store), ws_(whitespace) {
  auto punct = [&](char c, bool before, bool after) {
    ExprId e = s_.byte(static_cast<uint8_t>(c));
    if (before) e = s_.concat(ws_, e);
    if (after) e = s_.concat(e, ws_);
    return e;
  };
  open_object_ = punct('{', false, true);
  close_object_ = punct('}', true, false);
  open_array_ = punct('[', false, true);
  close_array_ = punct(']', true, false);
  comma_ = punct(',', true, true);
  colon_ = punct(':', true, true);

  // Any character: raw (not '"', '\\' or a control), a short escape, or \uXXXX where a
  // high surrogate must be followed by a low one.
  CodepointSet raw = CodepointSet::range(0x20, CodepointSet::kMax).minus(CodepointSet::of('"')).minus(CodepointSet::of('\\'));
  ExprId hex = hex_digit(s_);
  ByteSet not_d = ByteSet::range('0', '9');
  not_d.add_range('a', 'c');
  not_d.add_range('A', 'C');
  not_d.add_range('e', 'f');
  not_d.add_range('E', 'F');
  ByteSet d;
  d.add('d');
  d.add('D');
  ByteSet high2 = ByteSet::range('8', '9');
  high2.add_range('a', 'b');
  high2.add_range('A', 'B');
  ByteSet low2 = ByteSet::range('c', 'f');
  low2.add_range('C', 'F');
  ExprId bmp = s_.alt(s_.concat(std::vector<ExprId>{s_.bytes(not_d), hex, hex, hex}),
                      s_.concat(std::vector<ExprId>{s_.bytes(d), s_.bytes(ByteSet::range('0', '7')), hex, hex}));
  ExprId high = s_.concat(std::vector<ExprId>{s_.bytes(d), s_.bytes(high2), hex, hex});
  ExprId low = s_.concat(std::vector<ExprId>{s_.bytes(d), s_.bytes(low2), hex, hex});
  ExprId u = s_.literal("\\u");
  ByteSet short_escapes;
  for (char c : std::string("\"\\/bfnrt")) short_escapes.add(static_cast<uint8_t>(c));
  std::vector<ExprId> alts{utf8_expr(s_, raw), s_.concat(s_.byte('\\'), s_.bytes(short_escapes)), s_.concat(u, bmp),
                           s_.concat(std::vector<ExprId>{u, high, u, low})};
  any_char_ = s_.alt(alts);
}

ExprId JsonLexemes::chars(const CodepointSet& set, bool canonical) {
  CodepointSet raw = set.minus(CodepointSet::range(0, 0x1F)).minus(CodepointSet::of('"')).minus(CodepointSet::of('\\'));
  std::vector<ExprId> alts{utf8_expr(s_, raw)};
  if (set.contains('"')) alts.push_back(s_.literal("\\\""));
  if (set.contains('\\')) alts.push_back(s_.literal("\\\\"));
  if (set.contains('/') && !canonical) alts.push_back(s_.literal("\\/"));
  const CodepointSet controls = set.intersect(CodepointSet::range(0, 0x1F));
  for (const auto& [lo, hi] : controls.ranges()) {
    for (uint32_t c = lo; c <= hi; ++c) {
      const char* short_form = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : nullptr;
      if (short_form) alts.push_back(s_.literal(short_form));
      if (!canonical) {
        alts.push_back(s_.concat(s_.literal("\\u00"), hex_byte_any_case(s_, c)));
      } else if (!short_form) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        alts.push_back(s_.literal(buf));
      }
    }
  }
  return s_.alt(alts);
}

Result<ExprId> JsonLexemes::string_content(const StringConstraints& c, bool canonical) {
  uint32_t hi = c.max_length ? static_cast<uint32_t>(std::min<uint64_t>(*c.max_length, ExprStore::kUnbounded - 1))
                             : ExprStore::kUnbounded;
  auto lo = static_cast<uint32_t>(std::min<uint64_t>(c.min_length, ExprStore::kUnbounded - 1));
  ExprId one_char = canonical ? chars(CodepointSet::all(), true) : any_char_;
  std::vector<ExprId> all{s_.repeat(one_char, lo, hi)};
  CharEncoder encode = [this, canonical](const CodepointSet& set) { return chars(set, canonical); };
  for (const std::string& p : c.patterns) {
    auto tree = parse_regex(p, RegexDialect::ecmascript);
    if (!tree) return invalid_argument("pattern \"" + p + "\": " + tree.status().message());
    auto e = lower_search(s_, *tree, encode, CodepointSet::all());
    if (!e) return invalid_argument("pattern \"" + p + "\": " + e.status().message());
    all.push_back(*e);
  }
  for (const std::string& f : c.formats) {
    for (const std::string& p : format_patterns(f)) {
      auto tree = parse_regex(p, RegexDialect::ecmascript);
      if (!tree) return internal_error("format " + f + ": " + tree.status().message());
      auto e = lower_full_match(s_, *tree, encode);
      if (!e) return internal_error("format " + f + ": " + e.status().message());
      all.push_back(*e);
    }
  }
  return s_.both(all);
}

Result<ExprId> JsonLexemes::string(const StringConstraints& c) {
  auto content = string_content(c);
  if (!content) return content;
  return quoted(*content);
}

ExprId JsonLexemes::number(const NumberConstraints& c) {
  ExprId digit = s_.bytes(ByteSet::range('0', '9'));
  // An integer is written without a fraction: draft 04 does not count 1.0 as an integer
  // (later drafts do), and json.dumps writes integers without one.
  if (c.integer) {
    std::optional<Decimal> lo, hi;
    if (c.lower) lo = c.lower->exclusive ? c.lower->value.plus_one() : c.lower->value.ceil();
    if (c.upper) hi = c.upper->exclusive ? c.upper->value.minus_one() : c.upper->value.floor();
    return integer_range(s_, lo, hi);
  }
  if (c.lower || c.upper) return number_range(s_, c.lower, c.upper);
  ExprId integer_part = s_.alt(s_.byte('0'), s_.concat(s_.bytes(ByteSet::range('1', '9')), s_.star(digit)));
  ExprId fraction = s_.optional(s_.concat(s_.byte('.'), s_.plus(digit)));
  ByteSet e;
  e.add('e');
  e.add('E');
  ByteSet sign;
  sign.add('+');
  sign.add('-');
  ExprId exponent = s_.optional(s_.concat(std::vector<ExprId>{s_.bytes(e), s_.optional(s_.bytes(sign)), s_.plus(digit)}));
  return s_.concat(std::vector<ExprId>{s_.optional(s_.byte('-')), integer_part, fraction, exponent});
}

ExprId JsonLexemes::key(std::string_view key_utf8) {
  return s_.concat(s_.literal(json_io::python_json_string(key_utf8)), colon_);
}

}  // namespace troupe::structured
