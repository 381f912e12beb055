// Lark grammars as llguidance and vLLM's guidance backend take them:
//   rule: expansion | expansion      (lowercase names; `?rule` and `!rule` too)
//   TERMINAL: "literal" | /regex/flags | OTHER_TERMINAL ...   (uppercase)
//   items: "literal"i?  /regex/flags  name  (group)  [optional]  "a".."z"
//          item* item+ item? item~n item~n..m
//   %ignore ITEM    %import common.NAME (-> ALIAS)    %import common (A, B)
//   %json { schema }   (an item: a JSON value the schema admits)
// `//` starts a comment; a definition goes on over lines that start with `|`
// and inside brackets. Templates, %declare, %override and %extend are refused.
#include <cctype>
#include <optional>

#include "runtime/rank/structured/grammar_text_ast.hpp"
#include "runtime/rank/structured/regex_expr.hpp"

namespace troupe::structured {
namespace {

constexpr uint32_t kMaxNesting = 200;
constexpr uint32_t kMaxCount = 100'000;

bool is_terminal_name(const std::string& name) {
  for (char c : name) {
    if (std::islower(static_cast<unsigned char>(c))) return false;
  }
  return !name.empty();
}

class LarkParser {
 public:
  explicit LarkParser(std::string_view text) : t_(text) {}

  Result<GrammarText> parse() {
    g_.lark = true;
    g_.start = "start";
    while (true) {
      skip_blank_lines();
      if (pos_ >= t_.size()) break;
      if (t_[pos_] == '%') {
        TROUPE_RETURN_IF_ERROR(directive());
      } else {
        TROUPE_RETURN_IF_ERROR(definition());
      }
    }
    return std::move(g_);
  }

 private:
  TextPosition here() const { return position_of(t_, pos_); }
  Status error(const std::string& m) const { return grammar_error(here(), m); }

  // Spaces, tabs and comments on this line; with `lines`, newlines too.
  void skip_space(bool lines) {
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c == '/' && pos_ + 1 < t_.size() && t_[pos_ + 1] == '/') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (lines && c == '\n')) {
        ++pos_;
      } else if (c == '\\' && pos_ + 1 < t_.size() && t_[pos_ + 1] == '\n') {
        pos_ += 2;  // an escaped newline continues the line
      } else {
        break;
      }
    }
  }
  void skip_blank_lines() { skip_space(true); }

  // A newline (and blank lines) followed by '|' continues a definition.
  bool continues_on_next_line() {
    size_t save = pos_;
    skip_space(true);
    if (pos_ < t_.size() && t_[pos_] == '|') return true;
    pos_ = save;
    return false;
  }

  std::string read_name() {
    size_t start = pos_;
    while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_')) ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }

  Status definition() {
    TextPosition at = here();
    if (t_[pos_] == '?' || t_[pos_] == '!') ++pos_;  // inlining / keeping tokens: no effect on the language
    std::string name = read_name();
    if (name.empty()) return error("a rule or terminal name was expected");
    if (pos_ < t_.size() && t_[pos_] == '{') return error("rule templates are not supported");
    if (pos_ < t_.size() && t_[pos_] == '.') {  // priority: ignored (the lexer is contextual)
      ++pos_;
      if (pos_ < t_.size() && t_[pos_] == '-') ++pos_;
      while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    }
    skip_space(false);
    if (pos_ >= t_.size() || t_[pos_] != ':') return error("':' was expected after \"" + name + "\"");
    ++pos_;
    auto body = expansions(0);
    if (!body) return body.status();
    skip_space(false);
    if (pos_ < t_.size() && t_[pos_] != '\n') return error(std::string("unexpected '") + t_[pos_] + "'");
    g_.rules.push_back({name, std::move(*body), at, is_terminal_name(name)});
    return {};
  }

  Status directive() {
    TextPosition at = here();
    ++pos_;
    std::string word = read_name();
    skip_space(false);
    if (word == "ignore") {
      auto item = expansions(0);
      if (!item) return item.status();
      g_.ignore.push_back(std::move(*item));
      return {};
    }
    if (word == "import") {
      std::string module = read_name();
      if (module != "common") return grammar_error(at, "only %import common is supported");
      if (pos_ < t_.size() && t_[pos_] == '.') {
        ++pos_;
        std::string name = read_name();
        std::string alias = name;
        skip_space(false);
        if (t_.substr(pos_, 2) == "->") {
          pos_ += 2;
          skip_space(false);
          alias = read_name();
        }
        return import_common(name, alias, at);
      }
      skip_space(false);
      if (pos_ >= t_.size() || t_[pos_] != '(') return error("'.NAME' or '(NAMES)' was expected after %import common");
      ++pos_;
      while (true) {
        skip_space(true);
        std::string name = read_name();
        if (name.empty()) return error("a terminal name was expected");
        TROUPE_RETURN_IF_ERROR(import_common(name, name, at));
        skip_space(true);
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < t_.size() && t_[pos_] == ')') {
          ++pos_;
          return {};
        }
        return error("',' or ')' was expected");
      }
    }
    return grammar_error(at, "%" + word + " is not supported");
  }

  Status import_common(const std::string& name, const std::string& alias, const TextPosition& at) {
    GrammarNode ref;
    ref.kind = GrammarNode::Kind::ref;
    ref.text = "common." + name;  // resolved by the lowering, which knows the common terminals
    ref.at = at;
    g_.rules.push_back({alias, std::move(ref), at, true});
    return {};
  }

  Result<GrammarNode> expansions(uint32_t depth) {
    if (depth > kMaxNesting) return error("groups nested too deep");
    GrammarNode alt;
    alt.kind = GrammarNode::Kind::alt;
    alt.at = here();
    while (true) {
      auto seq = expansion(depth);
      if (!seq) return seq;
      alt.kids.push_back(std::move(*seq));
      skip_space(depth > 0);
      if (pos_ < t_.size() && t_[pos_] == '|') {
        ++pos_;
        continue;
      }
      if (depth == 0 && continues_on_next_line()) {
        ++pos_;
        continue;
      }
      break;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<GrammarNode> expansion(uint32_t depth) {
    GrammarNode seq;
    seq.kind = GrammarNode::Kind::seq;
    seq.at = here();
    while (true) {
      skip_space(depth > 0);
      if (pos_ >= t_.size()) break;
      char c = t_[pos_];
      if (c == '|' || c == ')' || c == ']' || c == '\n') break;
      if (c == '-' && pos_ + 1 < t_.size() && t_[pos_ + 1] == '>') {  // an alias: names the tree node only
        pos_ += 2;
        skip_space(false);
        read_name();
        break;
      }
      auto item = atom(depth);
      if (!item) return item;
      auto q = quantified(std::move(*item));
      if (!q) return q;
      seq.kids.push_back(std::move(*q));
    }
    return seq;
  }

  std::optional<uint32_t> number() {
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) {
      v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(t_[pos_] - '0'), uint64_t{1} << 40);
      ++pos_;
    }
    if (pos_ == start || v > kMaxCount) return std::nullopt;
    return static_cast<uint32_t>(v);
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
      } else if (c == '~') {
        ++pos_;
        skip_space(false);
        auto lo = number();
        if (!lo) return error("a count was expected after '~'");
        r.lo = r.hi = *lo;
        if (t_.substr(pos_, 2) == "..") {
          pos_ += 2;
          auto hi = number();
          if (!hi) return error("a count was expected after '..'");
          r.hi = *hi;
          if (r.lo > r.hi) return grammar_error(r.at, "repetition ~m..n with m > n");
        }
      } else {
        break;
      }
      r.kids.push_back(std::move(item));
      item = std::move(r);
    }
    return item;
  }

  // A "..." string (Python escapes) as UTF-8.
  Result<std::string> string_literal() {
    TextPosition at = here();
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= t_.size() || t_[pos_] == '\n') return grammar_error(at, "unterminated string");
      char c = t_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= t_.size()) return grammar_error(at, "unterminated string");
      char e = t_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'b': out += '\b'; break;
        case '0': out += '\0'; break;
        case 'x':
        case 'u':
        case 'U': {
          int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (int i = 0; i < digits; ++i) {
            if (pos_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[pos_]))) return error("bad escape");
            char h = t_[pos_++];
            v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          if (v > CodepointSet::kMax) return error("code point out of range");
          append_utf8(out, v);
          break;
        }
        default: out += e;  // \\ \" and others: the character
      }
    }
    return out;
  }

  Result<GrammarNode> atom(uint32_t depth) {
    GrammarNode n;
    n.at = here();
    char c = t_[pos_];
    if (c == '(' || c == '[') {
      ++pos_;
      auto inner = expansions(depth + 1);
      if (!inner) return inner;
      skip_space(true);
      char close = c == '(' ? ')' : ']';
      if (pos_ >= t_.size() || t_[pos_] != close) return error(std::string("'") + close + "' was expected");
      ++pos_;
      if (c == '(') return inner;
      n.kind = GrammarNode::Kind::repeat;
      n.lo = 0;
      n.hi = 1;
      n.kids.push_back(std::move(*inner));
      return n;
    }
    if (c == '"') {
      auto s = string_literal();
      if (!s) return s.status();
      if (t_.substr(pos_, 2) == "..") {  // "a".."z": a range of characters
        pos_ += 2;
        skip_space(false);
        if (pos_ >= t_.size() || t_[pos_] != '"') return error("a string was expected after '..'");
        auto e = string_literal();
        if (!e) return e.status();
        auto single = [](const std::string& s) -> std::optional<uint32_t> {
          uint32_t cp = 0;
          auto b0 = static_cast<uint8_t>(s.empty() ? 0 : s[0]);
          size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : 4;
          if (s.size() != n) return std::nullopt;
          cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
          for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
          return cp;
        };
        auto lo = single(*s), hi = single(*e);
        if (!lo || !hi || *lo > *hi) return grammar_error(n.at, "a range needs two single characters in order");
        n.kind = GrammarNode::Kind::chars;
        n.chars = CodepointSet::range(*lo, *hi);
        return n;
      }
      n.kind = GrammarNode::Kind::literal;
      n.text = std::move(*s);
      if (pos_ < t_.size() && t_[pos_] == 'i') {
        n.fold_case = true;
        ++pos_;
      }
      return n;
    }
    if (c == '/') {
      ++pos_;
      size_t start = pos_;
      while (pos_ < t_.size() && t_[pos_] != '/') {
        if (t_[pos_] == '\n') return grammar_error(n.at, "unterminated regex");
        if (t_[pos_] == '\\') ++pos_;
        ++pos_;
      }
      if (pos_ >= t_.size()) return grammar_error(n.at, "unterminated regex");
      n.kind = GrammarNode::Kind::regex;
      // "\/" inside the slashes is a slash.
      for (size_t i = start; i < pos_; ++i) {
        if (t_[i] == '\\' && i + 1 < pos_ && t_[i + 1] == '/') continue;
        n.text += t_[i];
      }
      ++pos_;
      while (pos_ < t_.size() && std::isalpha(static_cast<unsigned char>(t_[pos_]))) n.flags += t_[pos_++];
      for (char f : n.flags) {
        if (f != 'i' && f != 's') return grammar_error(n.at, std::string("regex flag '") + f + "' is not supported");
      }
      return n;
    }
    if (c == '%') {
      ++pos_;
      std::string word = read_name();
      if (word != "json") return grammar_error(n.at, "%" + word + " is not supported inside a rule");
      skip_space(true);
      if (pos_ >= t_.size() || t_[pos_] != '{') return error("'{' was expected after %json");
      size_t start = pos_;
      int level = 0;
      bool in_string = false;
      for (; pos_ < t_.size(); ++pos_) {
        char ch = t_[pos_];
        if (in_string) {
          if (ch == '\\') {
            ++pos_;
          } else if (ch == '"') {
            in_string = false;
          }
        } else if (ch == '"') {
          in_string = true;
        } else if (ch == '{') {
          ++level;
        } else if (ch == '}' && --level == 0) {
          break;
        }
      }
      if (pos_ >= t_.size()) return grammar_error(n.at, "unterminated %json object");
      ++pos_;
      n.kind = GrammarNode::Kind::json_schema;
      n.text = std::string(t_.substr(start, pos_ - start));
      return n;
    }
    if (c == '<') return error("special tokens (<...>) are not supported");
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      n.kind = GrammarNode::Kind::ref;
      n.text = read_name();
      if (pos_ < t_.size() && t_[pos_] == '{') return error("rule templates are not supported");
      return n;
    }
    return error(std::string("unexpected '") + c + "'");
  }

  std::string_view t_;
  size_t pos_ = 0;
  GrammarText g_;
};

}  // namespace

Result<GrammarText> parse_lark(std::string_view text) { return LarkParser(text).parse(); }

}  // namespace troupe::structured
