#include "runtime/text/chat/jinja/lexer.hpp"

#include <cctype>

#include "runtime/text/chat/jinja/value.hpp"
#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/// jinja2 splits on \r\n, \r and \n, drops one trailing newline and joins with "\n".
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t cp) { tokenizer::append_utf8(cp, &out); }

/// A string literal's body with Python's escapes decoded (jinja2 decodes with unicode-escape).
std::string decode_string(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](size_t n) {
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i + k >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + k])))
          throw Error("line " + std::to_string(line) + ": truncated \\x, \\u or \\U escape in a string");
        const char h = body[i + k];
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      i += n;
      return v;
    };
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\n': break;  // a line continuation
      case 'x': append_utf8(out, hex(2)); break;
      case 'u': append_utf8(out, hex(4)); break;
      case 'U': append_utf8(out, hex(8)); break;
      default:
        if (c >= '0' && c <= '7') {
          uint32_t v = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
          append_utf8(out, v);
        } else {
          out += '\\';  // Python keeps unknown escapes as written
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      // The next tag opening: {{, {% or {#.
      size_t tag = pos_;
      while (true) {
        tag = s_.find('{', tag);
        if (tag == std::string::npos || tag + 1 >= s_.size()) {
          tag = std::string::npos;
          break;
        }
        const char n = s_[tag + 1];
        if (n == '{' || n == '%' || n == '#') break;
        ++tag;
      }
      if (tag == std::string::npos) {
        emit_text(s_.substr(pos_));
        break;
      }
      std::string text = s_.substr(pos_, tag - pos_);
      const char kind = s_[tag + 1];
      const char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        count_lines(text.substr(end));
        text.resize(end);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks: not for {{ }}
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(text);
      pos_ = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        line_starting = comment();
      } else if (kind == '%' && raw_begin()) {
        line_starting = raw();
      } else {
        line_starting = expression(kind == '%');
      }
    }
    out_.push_back({Token::Type::eof, "", line_});
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error("line " + std::to_string(line_) + ": " + what); }

  void count_lines(const std::string& s) {
    for (char c : s) line_ += c == '\n';
  }

  void emit_text(const std::string& text) {
    if (text.empty()) return;
    out_.push_back({Token::Type::text, text, line_});
    count_lines(text);
  }

  /// After a closing delimiter at pos_ (already past it): apply -, + or trim_blocks. Returns line_starting.
  bool after_close(char sign, bool block) {
    const size_t start = pos_;
    if (sign == '-') {
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
    } else if (sign != '+' && block && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    count_lines(s_.substr(start, pos_ - start));
    if (pos_ > start) return s_[pos_ - 1] == '\n';
    return false;
  }

  bool comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail("missing end of comment tag");
    const char sign = end > pos_ && (s_[end - 1] == '-' || s_[end - 1] == '+') ? s_[end - 1] : 0;
    count_lines(s_.substr(pos_, end + 2 - pos_));
    pos_ = end + 2;
    return after_close(sign, true);
  }

  /// "{% raw %}" (pos_ just past "{%" and its sign): consumes through "%}" if so.
  bool raw_begin() {
    size_t p = pos_;
    while (p < s_.size() && is_space(s_[p])) ++p;
    if (s_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    if (p < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) return false;
    while (p < s_.size() && is_space(s_[p])) ++p;
    char sign = 0;
    if (p < s_.size() && s_[p] == '-') sign = '-', ++p;
    if (s_.compare(p, 2, "%}") != 0) return false;
    count_lines(s_.substr(pos_, p + 2 - pos_));
    pos_ = p + 2;
    if (sign == '-') after_close('-', true);  // jinja2 applies no trim_blocks after {% raw %}
    return true;
  }

  bool raw() {
    size_t search = pos_;
    while (true) {
      const size_t tag = s_.find("{%", search);
      if (tag == std::string::npos) fail("missing end of raw directive");
      size_t p = tag + 2;
      char sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
      while (p < s_.size() && is_space(s_[p])) ++p;
      if (s_.compare(p, 6, "endraw") != 0) {
        search = tag + 2;
        continue;
      }
      p += 6;
      while (p < s_.size() && is_space(s_[p])) ++p;
      char end_sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) end_sign = s_[p++];
      if (s_.compare(p, 2, "%}") != 0) {
        search = tag + 2;
        continue;
      }
      std::string text = s_.substr(pos_, tag - pos_);
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+') {
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0) {  // line_starting is false here: the text follows the raw tag
          bool blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(text);
      count_lines(s_.substr(tag, p + 2 - tag));
      pos_ = p + 2;
      return after_close(end_sign, true);
    }
  }

  bool expression(bool block) {
    out_.push_back({block ? Token::Type::block_begin : Token::Type::var_begin, "", line_});
    std::vector<char> balance;
    while (true) {
      while (pos_ < s_.size() && is_space(s_[pos_])) {
        line_ += s_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= s_.size()) fail(block ? "unexpected end of template: a block tag ('{%') is not closed" : "unexpected end of template: a variable tag ('{{') is not closed");
      const char c = s_[pos_];
      const std::string_view rest(s_.data() + pos_, s_.size() - pos_);
      if (balance.empty()) {
        const std::string_view close = block ? "%}" : "}}";
        char sign = 0;
        size_t n = 0;
        if (rest.substr(0, 2) == close) n = 2;
        else if ((c == '-' || (block && c == '+')) && rest.substr(1, 2) == close) sign = c, n = 3;
        if (n) {
          pos_ += n;
          out_.push_back({block ? Token::Type::block_end : Token::Type::var_end, "", line_});
          return after_close(sign, block);
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
        out_.push_back({Token::Type::name, s_.substr(pos_, e - pos_), line_});
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        size_t e = pos_ + 1;
        while (e < s_.size() && s_[e] != c) e += s_[e] == '\\' ? 2 : 1;
        if (e >= s_.size()) fail("unterminated string");
        const std::string body = s_.substr(pos_ + 1, e - pos_ - 1);
        out_.push_back({Token::Type::string, decode_string(body, line_), line_});
        count_lines(body);
        pos_ = e + 1;
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(",
                                    ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
        std::string op;
        for (const char* o : ops)
          if (rest.substr(0, std::char_traits<char>::length(o)) == o) {
            op = o;
            break;
          }
        if (op.empty()) fail(std::string("unexpected char '") + c + "'");
        if (op == "(" || op == "[" || op == "{") balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        if (op == ")" || op == "]" || op == "}") {
          if (balance.empty()) fail("unexpected '" + op + "'");
          if (balance.back() != op[0]) fail("unexpected '" + op + "', expected '" + std::string(1, balance.back()) + "'");
          balance.pop_back();
        }
        out_.push_back({Token::Type::op, op, line_});
        pos_ += op.size();
      }
    }
  }

  void number() {
    auto digits = [&](size_t p) {
      while (p < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p])) || (s_[p] == '_' && p + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p + 1]))))) ++p;
      return p;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    const bool after_dot = !out_.empty() && out_.back().type == Token::Type::op && out_.back().value == ".";
    if (!after_dot) {
      if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
        e = digits(e + 1);
        is_float = true;
      }
      if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
        size_t p = e + 1;
        if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
        if (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) {
          e = digits(p);
          is_float = true;
        }
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (s_[i] != '_') text += s_[i];
    out_.push_back({is_float ? Token::Type::floating : Token::Type::integer, text, line_});
    pos_ = e;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace troupe::jinja
