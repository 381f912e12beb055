// GBNF, llama.cpp's grammar format, and the EBNF xgrammar reads (the same
// notation): rules `name ::= alternatives`, literals "...", character classes
// [a-z] / [^...], `.` for any character, groups, `*` `+` `?` `{m}` `{m,}`
// `{m,n}`, `#` comments. A rule ends where the next `name ::=` starts; the
// start rule is `root`.
#include <algorithm>
#include <cctype>
#include <optional>

#include "runtime/rank/structured/grammar_text_ast.hpp"
#include "runtime/rank/structured/regex_expr.hpp"

namespace troupe::structured {

TextPosition position_of(std::string_view text, size_t offset) {
  TextPosition p;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++p.column;
    }
  }
  return p;
}

Status grammar_error(const TextPosition& at, const std::string& message) {
  return invalid_argument("grammar: line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " +
                          message);
}

namespace {

constexpr uint32_t kMaxNesting = 200;
constexpr uint32_t kMaxCount = 100'000;

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : t_(text) {}

  Result<GrammarText> parse() {
    GrammarText g;
    g.start = "root";
    skip_space();
    while (pos_ < t_.size()) {
      TextPosition at = here();
      std::string name = read_name();
      if (name.empty()) return error("a rule name was expected");
      skip_space();
      if (t_.substr(pos_, 3) != "::=") return error("'::=' was expected after the rule name");
      pos_ += 3;
      auto body = alternatives(0);
      if (!body) return body.status();
      g.rules.push_back({name, std::move(*body), at, false});
      skip_space();
    }
    return g;
  }

 private:
  TextPosition here() const { return position_of(t_, pos_); }
  Status error(const std::string& m) const { return grammar_error(here(), m); }

  void skip_space() {
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  std::string read_name() {
    size_t start = pos_;
    while (pos_ < t_.size() && name_char(t_[pos_])) ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }

  // At a name that starts the next rule (`name ::=`)?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < t_.size() && name_char(t_[p])) ++p;
    if (p == pos_) return false;
    while (p < t_.size() && std::isspace(static_cast<unsigned char>(t_[p]))) ++p;
    return t_.substr(p, 3) == "::=";
  }

  Result<GrammarNode> alternatives(uint32_t depth) {
    if (depth > kMaxNesting) return error("groups nested too deep");
    GrammarNode alt;
    alt.kind = GrammarNode::Kind::alt;
    alt.at = here();
    while (true) {
      auto seq = sequence(depth);
      if (!seq) return seq;
      alt.kids.push_back(std::move(*seq));
      skip_space();
      if (pos_ < t_.size() && t_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<GrammarNode> sequence(uint32_t depth) {
    GrammarNode seq;
    seq.kind = GrammarNode::Kind::seq;
    seq.at = here();
    while (true) {
      skip_space();
      if (pos_ >= t_.size() || t_[pos_] == '|' || t_[pos_] == ')' || (depth == 0 && at_rule_start())) break;
      auto item = primary(depth);
      if (!item) return item;
      auto q = quantified(std::move(*item));
      if (!q) return q;
      seq.kids.push_back(std::move(*q));
    }
    return seq;
  }

  Result<GrammarNode> quantified(GrammarNode item) {
    for (int wraps = 0; pos_ < t_.size(); ++wraps) {
      if (wraps == 8) return error("too many repetition operators in a row");
      char c = t_[pos_];
      GrammarNode r;
      r.kind = GrammarNode::Kind::repeat;
      r.at = here();
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        r.lo = c == '+' ? 1 : 0;
        r.hi = c == '?' ? 1 : ExprStore::kUnbounded;
      } else if (c == '{') {
        ++pos_;
        auto lo = number();
        if (!lo) return error("a count was expected in {m,n}");
        r.lo = r.hi = *lo;
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          skip_space();
          if (pos_ < t_.size() && t_[pos_] == '}') {
            r.hi = ExprStore::kUnbounded;
          } else {
            auto hi = number();
            if (!hi) return error("a count was expected in {m,n}");
            r.hi = *hi;
          }
        }
        skip_space();
        if (pos_ >= t_.size() || t_[pos_] != '}') return error("'}' was expected");
        ++pos_;
        if (r.hi != ExprStore::kUnbounded && r.lo > r.hi) return grammar_error(r.at, "repetition {m,n} with m > n");
      } else {
        break;
      }
      r.kids.push_back(std::move(item));
      item = std::move(r);
    }
    return item;
  }

  std::optional<uint32_t> number() {
    skip_space();
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) {
      v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(t_[pos_] - '0'), uint64_t{1} << 40);
      ++pos_;
    }
    skip_space();
    if (pos_ == start || v > kMaxCount) return std::nullopt;
    return static_cast<uint32_t>(v);
  }

  // One character (UTF-8) or escape inside a literal or class.
  Result<uint32_t> char_or_escape() {
    if (t_[pos_] != '\\') {
      auto b0 = static_cast<uint8_t>(t_[pos_]);
      int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
      if (n == 0 || pos_ + n > t_.size()) return error("invalid UTF-8");
      uint32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
      for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(t_[pos_ + i]) & 0x3F);
      pos_ += n;
      return cp;
    }
    ++pos_;
    if (pos_ >= t_.size()) return error("a backslash at the end");
    char c = t_[pos_++];
    switch (c) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case 'f': return uint32_t{'\f'};
      case 'v': return uint32_t{'\v'};
      case 'b': return uint32_t{'\b'};
      case '0': return uint32_t{0};
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default: return static_cast<uint32_t>(static_cast<unsigned char>(c));  // \\ \" \] \[ \- and others: themselves
    }
  }

  Result<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[pos_]))) return error("bad hex escape");
      char h = t_[pos_++];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    if (v > CodepointSet::kMax) return error("code point out of range");
    return v;
  }

  Result<GrammarNode> primary(uint32_t depth) {
    GrammarNode n;
    n.at = here();
    char c = t_[pos_];
    if (c == '"') {
      ++pos_;
      n.kind = GrammarNode::Kind::literal;
      while (true) {
        if (pos_ >= t_.size()) return grammar_error(n.at, "unterminated string");
        if (t_[pos_] == '"') break;
        auto cp = char_or_escape();
        if (!cp) return cp.status();
        append_utf8(n.text, *cp);
      }
      ++pos_;
      return n;
    }
    if (c == '[') {
      ++pos_;
      n.kind = GrammarNode::Kind::chars;
      bool negated = pos_ < t_.size() && t_[pos_] == '^';
      if (negated) ++pos_;
      while (true) {
        if (pos_ >= t_.size()) return grammar_error(n.at, "unterminated character class");
        if (t_[pos_] == ']') break;
        auto lo = char_or_escape();
        if (!lo) return lo.status();
        uint32_t hi = *lo;
        if (pos_ + 1 < t_.size() && t_[pos_] == '-' && t_[pos_ + 1] != ']') {
          ++pos_;
          auto h = char_or_escape();
          if (!h) return h.status();
          hi = *h;
          if (hi < *lo) return error("character range out of order");
        }
        n.chars.add(*lo, hi);
      }
      ++pos_;
      if (negated) n.chars = n.chars.complement();
      return n;
    }
    if (c == '(') {
      ++pos_;
      auto inner = alternatives(depth + 1);
      if (!inner) return inner;
      skip_space();
      if (pos_ >= t_.size() || t_[pos_] != ')') return error("')' was expected");
      ++pos_;
      return inner;
    }
    if (c == '.') {
      ++pos_;
      n.kind = GrammarNode::Kind::chars;
      n.chars = CodepointSet::all();
      return n;
    }
    if (name_char(c)) {
      n.kind = GrammarNode::Kind::ref;
      n.text = read_name();
      return n;
    }
    if (c == '<') return error("token references (<...>) are not supported");
    return error(std::string("unexpected '") + c + "'");
  }

  std::string_view t_;
  size_t pos_ = 0;
};

}  // namespace

Result<GrammarText> parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace troupe::structured
