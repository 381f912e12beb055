#include "runtime/structured/json_matcher.hpp"

namespace troupe::structured {
namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

constexpr std::string_view kLiterals[3] = {"true", "false", "null"};

}  // namespace

bool JsonMatcher::whitespace(uint8_t c) {
  if (!is_ws(c) || ws_run_ >= kMaxWhitespaceRun) return false;
  ++ws_run_;
  return true;
}

void JsonMatcher::end_value() { mode_ = depth_ == 0 ? Mode::done : Mode::after_value; }

// A value starts with c (mode is value or value_or_close).
bool JsonMatcher::begin_value(uint8_t c) {
  if (c == '{' || c == '[') {
    if (depth_ >= kMaxDepth) return false;
    stack_[depth_++] = c;
    mode_ = c == '{' ? Mode::key_or_close : Mode::value_or_close;
    return true;
  }
  if (c == '"') {
    key_ = false;
    mode_ = Mode::string;
    return true;
  }
  if (c == '-') {
    mode_ = Mode::num_minus;
    return true;
  }
  if (c == '0') {
    mode_ = Mode::num_zero;
    return true;
  }
  if (is_digit(c)) {
    mode_ = Mode::num_int;
    return true;
  }
  for (uint8_t i = 0; i < 3; ++i) {
    if (c == static_cast<uint8_t>(kLiterals[i][0])) {
      mode_ = Mode::literal;
      aux_ = i;
      aux2_ = 1;
      return true;
    }
  }
  return false;
}

// The byte after a value, a key or a structural character (never inside a string or number).
bool JsonMatcher::feed_structural(uint8_t c) {
  switch (mode_) {
    case Mode::start:
      if (c != '{') return whitespace(c);
      stack_[depth_++] = c;
      mode_ = Mode::key_or_close;
      return true;
    case Mode::value:
      return begin_value(c) || whitespace(c);
    case Mode::value_or_close:
      if (c == ']') {
        --depth_;
        end_value();
        return true;
      }
      return begin_value(c) || whitespace(c);
    case Mode::key_or_close:
      if (c == '}') {
        --depth_;
        end_value();
        return true;
      }
      [[fallthrough]];
    case Mode::key:
      if (c != '"') return whitespace(c);
      key_ = true;
      mode_ = Mode::string;
      return true;
    case Mode::colon:
      if (c != ':') return whitespace(c);
      mode_ = Mode::value;
      return true;
    case Mode::after_value: {
      const uint8_t open = stack_[depth_ - 1];
      if (c == ',') {
        mode_ = open == '{' ? Mode::key : Mode::value;
        return true;
      }
      if ((open == '{' && c == '}') || (open == '[' && c == ']')) {
        --depth_;
        end_value();
        return true;
      }
      return whitespace(c);
    }
    default:
      return false;
  }
}

bool JsonMatcher::feed(uint8_t c) {
  const JsonMatcher before = *this;
  bool ok = false;
  switch (mode_) {
    case Mode::string:
      if (c == '"') {
        if (key_) {
          mode_ = Mode::colon;
        } else {
          end_value();
        }
        ok = true;
      } else if (c == '\\') {
        mode_ = Mode::escape;
        ok = true;
      } else {
        ok = c >= 0x20;  // control characters must be escaped; UTF-8 bytes pass
      }
      break;
    case Mode::escape:
      if (c == 'u') {
        mode_ = Mode::unicode;
        aux_ = 0;
        ok = true;
      } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        mode_ = Mode::string;
        ok = true;
      }
      break;
    case Mode::unicode:
      if (is_hex(c)) {
        if (++aux_ == 4) mode_ = Mode::string;
        ok = true;
      }
      break;
    case Mode::literal: {
      const std::string_view lit = kLiterals[aux_];
      if (c == static_cast<uint8_t>(lit[aux2_])) {
        if (++aux2_ == lit.size()) end_value();
        ok = true;
      }
      break;
    }
    case Mode::num_minus:
      if (c == '0') mode_ = Mode::num_zero, ok = true;
      else if (is_digit(c)) mode_ = Mode::num_int, ok = true;
      break;
    case Mode::num_frac_start:
      if (is_digit(c)) mode_ = Mode::num_frac, ok = true;
      break;
    case Mode::num_exp_start:
      if (c == '+' || c == '-') mode_ = Mode::num_exp_sign, ok = true;
      else if (is_digit(c)) mode_ = Mode::num_exp, ok = true;
      break;
    case Mode::num_exp_sign:
      if (is_digit(c)) mode_ = Mode::num_exp, ok = true;
      break;
    case Mode::num_zero:
    case Mode::num_int:
    case Mode::num_frac:
    case Mode::num_exp:
      // A number goes on while its grammar allows; any other byte ends it and is read after it.
      if (is_digit(c) && mode_ != Mode::num_zero) {
        ok = true;
      } else if (c == '.' && (mode_ == Mode::num_zero || mode_ == Mode::num_int)) {
        mode_ = Mode::num_frac_start;
        ok = true;
      } else if ((c == 'e' || c == 'E') && mode_ != Mode::num_exp) {
        mode_ = Mode::num_exp_start;
        ok = true;
      } else {
        end_value();
        ok = feed_structural(c);
      }
      break;
    case Mode::done:
      break;
    default:
      ok = feed_structural(c);
      break;
  }
  if (!ok) {
    *this = before;
    return false;
  }
  if (!is_ws(c)) ws_run_ = 0;
  return true;
}

bool JsonMatcher::feed(std::string_view text) {
  for (char ch : text)
    if (!feed(static_cast<uint8_t>(ch))) return false;
  return true;
}

std::string JsonMatcher::key() const {
  std::string k;
  k.reserve(6 + depth_);
  k.push_back(static_cast<char>(mode_));
  k.push_back(static_cast<char>(key_));
  k.push_back(static_cast<char>(aux_));
  k.push_back(static_cast<char>(aux2_));
  k.push_back(static_cast<char>(ws_run_));
  k.push_back(static_cast<char>(depth_));
  for (uint8_t i = 0; i < depth_; ++i) k.push_back(static_cast<char>(stack_[i]));
  return k;
}

}  // namespace troupe::structured
