#include "runtime/rank/structured/regex_syntax.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

namespace troupe::structured {
namespace {

using Kind = RegexNode::Kind;

RegexNode chars_node(CodepointSet set) {
  RegexNode n;
  n.kind = Kind::chars;
  n.chars = std::move(set);
  return n;
}

CodepointSet digit_set() { return CodepointSet::range('0', '9'); }

CodepointSet word_set() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_');
  return s;
}

// ECMAScript's WhiteSpace and LineTerminator (Python's \s for str patterns differs only
// in a few separators; this set is the one documented).
CodepointSet space_set() {
  CodepointSet s;
  for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu,
                     0x3000u, 0xFEFFu}) {
    s.add(c);
  }
  s.add(0x2000, 0x200A);
  return s;
}

class Parser {
 public:
  Parser(std::string_view text, RegexDialect dialect, const RegexLimits& limits)
      : text_(text), dialect_(dialect), limits_(limits) {}

  Result<RegexNode> parse() {
    auto node = alternation(0);
    if (!node) return node;
    if (pos_ < text_.size()) return error("unbalanced ')'");
    return node;
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument("regex: " + what + " at offset " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool eat(char c) {
    if (!at_end() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // One UTF-8 code point of the pattern text.
  std::optional<uint32_t> next_codepoint() {
    auto b0 = static_cast<uint8_t>(text_[pos_]);
    int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > text_.size()) return std::nullopt;
    uint32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int i = 1; i < n; ++i) {
      auto b = static_cast<uint8_t>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += n;
    return cp;
  }

  Result<RegexNode> alternation(uint32_t depth) {
    if (depth > limits_.max_depth) return error("groups nested deeper than " + std::to_string(limits_.max_depth));
    std::vector<RegexNode> alts;
    while (true) {
      auto seq = sequence(depth);
      if (!seq) return seq;
      alts.push_back(std::move(*seq));
      if (!eat('|')) break;
    }
    if (alts.size() == 1) return std::move(alts[0]);
    RegexNode n;
    n.kind = Kind::alt;
    n.kids = std::move(alts);
    return n;
  }

  Result<RegexNode> sequence(uint32_t depth) {
    std::vector<RegexNode> parts;
    while (!at_end() && peek() != '|' && peek() != ')') {
      auto atom = this->atom(depth);
      if (!atom) return atom;
      auto quantified = quantifier(std::move(*atom));
      if (!quantified) return quantified;
      parts.push_back(std::move(*quantified));
    }
    if (parts.size() == 1) return std::move(parts[0]);
    RegexNode n;
    n.kind = parts.empty() ? Kind::empty : Kind::concat;
    n.kids = std::move(parts);
    return n;
  }

  // {n}, {n,}, {n,m} at pos_ (after '{'); nullopt when the text is not a quantifier.
  std::optional<std::pair<uint32_t, uint32_t>> counted(bool* too_big) {
    size_t save = pos_;
    auto number = [&](uint64_t* out) {
      size_t start = pos_;
      uint64_t v = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(peek() - '0'), uint64_t{1} << 40);
        ++pos_;
      }
      *out = v;
      return pos_ > start;
    };
    uint64_t lo = 0, hi = 0;
    bool python_open_low = dialect_ == RegexDialect::python && !at_end() && peek() == ',';  // {,n}
    if (!python_open_low && !number(&lo)) {
      pos_ = save;
      return std::nullopt;
    }
    hi = lo;
    bool unbounded = false;
    if (eat(',')) {
      if (!number(&hi)) unbounded = true;
    }
    if (!eat('}')) {
      pos_ = save;
      return std::nullopt;
    }
    if (lo > limits_.max_count || (!unbounded && hi > limits_.max_count)) *too_big = true;
    return std::make_pair(static_cast<uint32_t>(std::min<uint64_t>(lo, UINT32_MAX - 1)),
                          unbounded ? ExprStore::kUnbounded : static_cast<uint32_t>(std::min<uint64_t>(hi, UINT32_MAX - 1)));
  }

  Result<RegexNode> quantifier(RegexNode atom) {
    while (!at_end()) {
      uint32_t lo, hi;
      size_t at = pos_;
      char c = peek();
      if (c == '*') {
        lo = 0, hi = ExprStore::kUnbounded;
        ++pos_;
      } else if (c == '+') {
        lo = 1, hi = ExprStore::kUnbounded;
        ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1;
        ++pos_;
      } else if (c == '{') {
        ++pos_;
        bool too_big = false;
        auto count = counted(&too_big);
        if (!count) {
          pos_ = at;
          return atom;  // a literal '{' (Annex B): the next atom reads it
        }
        if (too_big) {
          pos_ = at;
          return error("repetition count over the limit of " + std::to_string(limits_.max_count));
        }
        if (count->second != ExprStore::kUnbounded && count->first > count->second) {
          pos_ = at;
          return error("repetition {m,n} with m > n");
        }
        lo = count->first, hi = count->second;
      } else {
        return atom;
      }
      if (atom.kind == Kind::line_start || atom.kind == Kind::line_end) {
        pos_ = at;
        return error("quantified anchor");
      }
      if (eat('+')) return error("possessive quantifiers are not supported");
      eat('?');  // lazy: the same language as greedy
      RegexNode r;
      r.kind = Kind::repeat;
      r.lo = lo;
      r.hi = hi;
      r.kids.push_back(std::move(atom));
      if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?')) return error("multiple repeat");
      return r;
    }
    return atom;
  }

  Result<RegexNode> group(uint32_t depth) {
    if (eat('?')) {
      if (eat(':')) {
        // non-capturing
      } else if (eat('=') || eat('!')) {
        return error("lookahead assertions are not supported");
      } else if (!at_end() && peek() == '<' && pos_ + 1 < text_.size() &&
                 (text_[pos_ + 1] == '=' || text_[pos_ + 1] == '!')) {
        return error("lookbehind assertions are not supported");
      } else if (eat('<') || (dialect_ == RegexDialect::python && eat('P') && eat('<'))) {
        while (!at_end() && peek() != '>') ++pos_;  // a named group: the name is not needed
        if (!eat('>')) return error("unterminated group name");
      } else if (dialect_ == RegexDialect::python && eat('P') && eat('=')) {
        return error("backreferences are not supported");
      } else {
        return error("inline flags and other (?...) groups are not supported");
      }
    }
    auto inner = alternation(depth + 1);
    if (!inner) return inner;
    if (!eat(')')) return error("missing ')'");
    return inner;
  }

  Result<RegexNode> atom(uint32_t depth) {
    char c = peek();
    if (c == '(') {
      ++pos_;
      return group(depth);
    }
    if (c == '[') {
      ++pos_;
      auto set = char_class();
      if (!set) return set.status();
      return chars_node(std::move(*set));
    }
    if (c == '.') {
      ++pos_;
      CodepointSet any = CodepointSet::all();
      if (limits_.dot_all) {
        // every character
      } else if (dialect_ == RegexDialect::python) {
        any = any.minus(CodepointSet::of('\n'));
      } else {
        CodepointSet terminators = CodepointSet::of('\n');
        terminators.add('\r');
        terminators.add(0x2028, 0x2029);
        any = any.minus(terminators);
      }
      return chars_node(std::move(any));
    }
    if (c == '^' || c == '$') {
      ++pos_;
      RegexNode n;
      n.kind = c == '^' ? Kind::line_start : Kind::line_end;
      return n;
    }
    if (c == '*' || c == '+' || c == '?') return error("nothing to repeat");
    if (c == '\\') {
      ++pos_;
      return escape_atom();
    }
    auto cp = next_codepoint();
    if (!cp) return error("invalid UTF-8");
    return chars_node(CodepointSet::of(*cp));
  }

  Result<RegexNode> escape_atom() {
    if (at_end()) return error("trailing backslash");
    char c = peek();
    if (c == 'b' || c == 'B') return error("word boundaries (\\b, \\B) are not supported");
    if (c >= '1' && c <= '9') return error("backreferences are not supported");
    if (c == 'k' && dialect_ == RegexDialect::ecmascript && pos_ + 1 < text_.size() && text_[pos_ + 1] == '<') {
      return error("backreferences are not supported");
    }
    if (dialect_ == RegexDialect::python && (c == 'A' || c == 'Z' || c == 'z')) {
      ++pos_;
      RegexNode n;
      n.kind = c == 'A' ? Kind::line_start : Kind::line_end;
      return n;
    }
    auto set = escape_set(false);
    if (!set) return set.status();
    return chars_node(std::move(*set));
  }

  // After a backslash: a class escape or one character. In a class, \b is a backspace.
  Result<CodepointSet> escape_set(bool in_class) {
    if (at_end()) return error("trailing backslash");
    char c = peek();
    ++pos_;
    switch (c) {
      case 'd': return digit_set();
      case 'D': return digit_set().complement();
      case 'w': return word_set();
      case 'W': return word_set().complement();
      case 's': return space_set();
      case 'S': return space_set().complement();
      case 'n': return CodepointSet::of('\n');
      case 'r': return CodepointSet::of('\r');
      case 't': return CodepointSet::of('\t');
      case 'f': return CodepointSet::of('\f');
      case 'v': return CodepointSet::of('\v');
      case 'a':
        if (dialect_ == RegexDialect::python) return CodepointSet::of(7);
        break;
      case '0':
        if (!at_end() && peek() >= '0' && peek() <= '9') return error("octal escapes are not supported");
        return CodepointSet::of(0);
      case 'b':
        if (in_class) return CodepointSet::of('\b');
        return error("word boundaries (\\b, \\B) are not supported");
      case 'p':
      case 'P':
        return error("Unicode property escapes (\\p{...}) are not supported");
      case 'c': {
        if (!at_end() && ((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z'))) {
          return CodepointSet::of(static_cast<uint32_t>(text_[pos_++]) % 32);
        }
        return error("bad \\c escape");
      }
      case 'x': {
        auto v = hex_digits(2, 2);
        if (!v) return error("bad \\x escape");
        return CodepointSet::of(*v);
      }
      case 'u': {
        auto v = unicode_escape();
        if (!v) return error("bad \\u escape");
        return CodepointSet::of(*v);
      }
      case 'U':
        if (dialect_ == RegexDialect::python) {
          auto v = hex_digits(8, 8);
          if (!v || *v > CodepointSet::kMax) return error("bad \\U escape");
          return CodepointSet::of(*v);
        }
        break;
      default:
        break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      --pos_;
      return error(std::string("unknown escape \\") + c);
    }
    --pos_;
    auto cp = next_codepoint();  // an escaped punctuation or other character: itself
    if (!cp) return error("invalid UTF-8");
    return CodepointSet::of(*cp);
  }

  std::optional<uint32_t> hex_digits(size_t min, size_t max) {
    uint32_t v = 0;
    size_t n = 0;
    while (n < max && !at_end() && std::isxdigit(static_cast<unsigned char>(peek()))) {
      char h = peek();
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_;
      ++n;
    }
    if (n < min) return std::nullopt;
    return v;
  }

  // \uHHHH (a surrogate pair as two escapes) or \u{H...}.
  std::optional<uint32_t> unicode_escape() {
    if (eat('{')) {
      auto v = hex_digits(1, 6);
      if (!v || !eat('}') || *v > CodepointSet::kMax) return std::nullopt;
      return v;
    }
    auto v = hex_digits(4, 4);
    if (!v) return std::nullopt;
    if (*v >= 0xD800 && *v <= 0xDBFF && pos_ + 1 < text_.size() && text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
      size_t save = pos_;
      pos_ += 2;
      auto low = hex_digits(4, 4);
      if (low && *low >= 0xDC00 && *low <= 0xDFFF) return 0x10000 + ((*v - 0xD800) << 10) + (*low - 0xDC00);
      pos_ = save;
    }
    return v;
  }

  Result<CodepointSet> class_atom() {
    if (peek() == '\\') {
      ++pos_;
      return escape_set(true);
    }
    if (peek() == '[' && pos_ + 1 < text_.size() && text_[pos_ + 1] == ':' && dialect_ == RegexDialect::python) {
      return error("POSIX classes ([:name:]) are not supported");
    }
    auto cp = next_codepoint();
    if (!cp) return error("invalid UTF-8");
    return CodepointSet::of(*cp);
  }

  // After '['.
  Result<CodepointSet> char_class() {
    bool negated = eat('^');
    CodepointSet set;
    bool first = true;
    while (true) {
      if (at_end()) return error("missing ']'");
      if (peek() == ']' && !(first && dialect_ == RegexDialect::python)) break;
      first = false;
      auto lo = class_atom();
      if (!lo) return lo;
      if (!at_end() && peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        auto hi = class_atom();
        if (!hi) return hi;
        const auto& lr = lo->ranges();
        const auto& hr = hi->ranges();
        bool single = lr.size() == 1 && hr.size() == 1 && lr[0].first == lr[0].second && hr[0].first == hr[0].second;
        if (!single) {
          if (dialect_ == RegexDialect::ecmascript) {  // Annex B: [\d-x] is \d, '-' and x
            set.add(*lo);
            set.add('-');
            set.add(*hi);
            continue;
          }
          return error("bad character range");
        }
        if (lr[0].first > hr[0].first) return error("character range out of order");
        set.add(lr[0].first, hr[0].first);
      } else {
        set.add(*lo);
      }
    }
    ++pos_;  // ']'
    return negated ? set.complement() : set;
  }

  std::string_view text_;
  RegexDialect dialect_;
  RegexLimits limits_;
  size_t pos_ = 0;
};

struct Lowerer {
  ExprStore& store;
  const CharEncoder& encode;

  Result<ExprId> lower(const RegexNode& n) {
    switch (n.kind) {
      case Kind::empty:
        return ExprStore::kEmpty;
      case Kind::chars:
        return encode(n.chars);
      case Kind::line_start:
        return invalid_argument("regex: '^' anchors only at the start of the pattern or of a top-level alternative");
      case Kind::line_end:
        return invalid_argument("regex: '$' anchors only at the end of the pattern or of a top-level alternative");
      case Kind::concat:
      case Kind::alt: {
        std::vector<ExprId> parts;
        for (const RegexNode& k : n.kids) {
          auto e = lower(k);
          if (!e) return e;
          parts.push_back(*e);
        }
        return n.kind == Kind::concat ? store.concat(parts) : store.alt(parts);
      }
      case Kind::repeat: {
        auto e = lower(n.kids[0]);
        if (!e) return e;
        return store.repeat(*e, n.lo, n.hi);
      }
    }
    return ExprStore::kNothing;
  }
};

// The alternatives of a pattern with anchors lifted: a top-level alternation, and an
// alternation group at the start or end of a sequence distributed over it, so that each
// alternative says whether it starts with '^' and ends with '$'.
struct Branch {
  RegexNode body;
  bool start_anchored = false;
  bool end_anchored = false;
};

std::vector<RegexNode> sequence_of(const RegexNode& n) {
  if (n.kind == Kind::concat) return n.kids;
  if (n.kind == Kind::empty) return {};
  return {n};
}

RegexNode make_sequence(std::vector<RegexNode> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  RegexNode n;
  n.kind = parts.empty() ? Kind::empty : Kind::concat;
  n.kids = std::move(parts);
  return n;
}

bool mentions_anchor(const RegexNode& n, Kind anchor) {
  if (n.kind == anchor) return true;
  for (const auto& k : n.kids) {
    if (mentions_anchor(k, anchor)) return true;
  }
  return false;
}

void split_branches(const RegexNode& n, std::vector<Branch>& out, int budget) {
  if (n.kind == Kind::alt) {
    for (const auto& k : n.kids) split_branches(k, out, budget);
    return;
  }
  std::vector<RegexNode> seq = sequence_of(n);
  // Distribute a leading or trailing alternation that mentions an anchor.
  for (int end = 0; end < 2 && budget > 0; ++end) {
    if (seq.empty()) break;
    const RegexNode& edge = end ? seq.back() : seq.front();
    if (edge.kind == Kind::alt && mentions_anchor(edge, end ? Kind::line_end : Kind::line_start)) {
      for (const auto& alt : edge.kids) {
        std::vector<RegexNode> s = seq;
        if (end) {
          s.pop_back();
          for (auto& p : sequence_of(alt)) s.push_back(p);
        } else {
          s.erase(s.begin());
          auto a = sequence_of(alt);
          s.insert(s.begin(), a.begin(), a.end());
        }
        split_branches(make_sequence(std::move(s)), out, budget - 1);
      }
      return;
    }
  }
  Branch b;
  while (!seq.empty() && seq.front().kind == Kind::line_start) {
    b.start_anchored = true;
    seq.erase(seq.begin());
  }
  while (!seq.empty() && seq.back().kind == Kind::line_end) {
    b.end_anchored = true;
    seq.pop_back();
  }
  b.body = make_sequence(std::move(seq));
  out.push_back(std::move(b));
}

}  // namespace

Result<RegexNode> parse_regex(std::string_view pattern, RegexDialect dialect, const RegexLimits& limits) {
  return Parser(pattern, dialect, limits).parse();
}

Result<ExprId> lower_full_match(ExprStore& store, const RegexNode& node, const CharEncoder& encode) {
  std::vector<Branch> branches;
  split_branches(node, branches, 8);
  Lowerer lower{store, encode};
  std::vector<ExprId> alts;
  for (const Branch& b : branches) {
    auto e = lower.lower(b.body);
    if (!e) return e;
    alts.push_back(*e);
  }
  return store.alt(alts);
}

Result<ExprId> lower_search(ExprStore& store, const RegexNode& node, const CharEncoder& encode,
                            const CodepointSet& any) {
  std::vector<Branch> branches;
  split_branches(node, branches, 8);
  Lowerer lower{store, encode};
  ExprId around = store.star(encode(any));
  std::vector<ExprId> alts;
  for (const Branch& b : branches) {
    auto e = lower.lower(b.body);
    if (!e) return e;
    ExprId parts[3] = {b.start_anchored ? ExprStore::kEmpty : around, *e,
                       b.end_anchored ? ExprStore::kEmpty : around};
    alts.push_back(store.concat(parts));
  }
  return store.alt(alts);
}

CodepointSet fold_ascii_case(const CodepointSet& set) {
  CodepointSet out = set;
  for (uint32_t c = 'a'; c <= 'z'; ++c) {
    if (set.contains(c)) out.add(c - 32);
    if (set.contains(c - 32)) out.add(c);
  }
  return out;
}

CharEncoder utf8_encoder(ExprStore& store) {
  return [&store](const CodepointSet& set) { return utf8_expr(store, set); };
}

}  // namespace troupe::structured
