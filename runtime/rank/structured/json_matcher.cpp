#include "runtime/rank/structured/json_matcher.hpp"

#include <algorithm>


namespace troupe::structured {
namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

constexpr std::string_view kLiterals[3] = {"true", "false", "null"};

}  // namespace

JsonMatcher::JsonMatcher() : JsonMatcher(json_object_schema().get()) {}

JsonMatcher::JsonMatcher(const CompiledSchema* schema) : schema_(schema), value_node_(schema->root) {}

bool JsonMatcher::whitespace(uint8_t c) {
  if (!is_ws(c) || ws_run_ >= kMaxWhitespaceRun) return false;
  ++ws_run_;
  return true;
}

void JsonMatcher::end_value() {
  if (depth_ == 0) {
    mode_ = Mode::done;
    return;
  }
  Frame& f = frames_[depth_ - 1];
  if (f.open == '{' && f.prop != kUndeclared) f.seen |= uint32_t{1} << f.prop;
  // Items are counted only where the schema bounds them: an unbounded count would make
  // every position a new state for the masker's cache.
  const SchemaNode& n = node(f.node);
  if (f.open == '[' && (n.min_items > 0 || n.max_items != UINT16_MAX) && f.count < UINT16_MAX) ++f.count;
  mode_ = Mode::after_value;
}

JsonMatcher::EnumRange JsonMatcher::prefix_range(const std::vector<std::string>& sorted, std::string_view prefix) {
  auto lo = std::lower_bound(sorted.begin(), sorted.end(), prefix,
                             [](const std::string& v, std::string_view p) { return std::string_view(v) < p; });
  auto hi = std::partition_point(lo, sorted.end(), [&](const std::string& v) {
    return v.size() >= prefix.size() && std::string_view(v).substr(0, prefix.size()) == prefix;
  });
  return {lo, hi};
}

void JsonMatcher::end_enum_value() {
  const std::string value = std::move(buf_);
  buf_.clear();
  end_value();
  if (depth_ == 0) return;
  Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  if (f.open != '{' || n.union_tags.empty()) return;
  // The tag (the union's only property, so the first key) picks the branch: the frame
  // goes on as that object, with its tag property seen.
  for (size_t i = 0; i < n.union_tags.size(); ++i) {
    if (n.union_tags[i] != value) continue;
    const uint16_t branch = n.union_branches[i];
    const SchemaNode& b = node(branch);
    for (size_t k = 0; k < b.property_keys.size(); ++k) {
      if (b.property_keys[k] != n.property_keys[0]) continue;
      f.node = branch;
      f.prop = static_cast<uint16_t>(k);
      f.seen = uint32_t{1} << k;
      return;
    }
  }
}

bool JsonMatcher::can_add_property(const Frame& f) const {
  const SchemaNode& n = node(f.node);
  if (n.additional != CompiledSchema::kNoNode) return true;
  const uint32_t all = n.property_keys.size() >= 32 ? ~uint32_t{0} : (uint32_t{1} << n.property_keys.size()) - 1;
  return (f.seen & all) != all;
}

// A value of node value_node_ starts with c (mode is start, value or value_or_close).
bool JsonMatcher::begin_value(uint8_t c) {
  const SchemaNode& n = node(value_node_);
  if (!n.enum_values.empty()) {
    const char first = static_cast<char>(c);
    if (prefix_range(n.enum_values, std::string_view(&first, 1)).empty()) return false;
    buf_.assign(1, first);
    mode_ = Mode::enum_value;
    return true;
  }
  if (c == '{' || c == '[') {
    if (!(n.types & (c == '{' ? kObject : kArray)) || depth_ >= kMaxDepth) return false;
    frames_[depth_++] = Frame{value_node_, 0, 0, c, 0, 0};
    if (c == '{') {
      mode_ = Mode::key_or_close;
    } else {
      mode_ = Mode::value_or_close;
      value_node_ = n.items;
    }
    return true;
  }
  if (c == '"') {
    if (!(n.types & kString)) return false;
    key_ = false;
    mode_ = Mode::string;
    return true;
  }
  if (c == '-' || is_digit(c)) {
    if (!(n.types & (kInteger | kNumber))) return false;
    int_only_ = !(n.types & kNumber);
    mode_ = c == '-' ? Mode::num_minus : c == '0' ? Mode::num_zero : Mode::num_int;
    return true;
  }
  for (uint8_t i = 0; i < 3; ++i) {
    if (c == static_cast<uint8_t>(kLiterals[i][0])) {
      if (!(n.types & (i == 2 ? kNull : kBoolean))) return false;
      mode_ = Mode::literal;
      aux_ = i;
      aux2_ = 1;
      return true;
    }
  }
  return false;
}

// The opening quote of a key in the innermost (object) frame.
bool JsonMatcher::begin_key() {
  if (!can_add_property(frames_[depth_ - 1])) return false;
  key_ = true;
  buf_.clear();
  buf_over_ = false;
  mode_ = Mode::string;
  return true;
}

// A byte of a key's text (escapes included, as written): with no undeclared properties
// allowed, the key so far must begin one of the properties not seen yet.
bool JsonMatcher::key_byte(uint8_t c) {
  const Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  const bool undeclared_ok = n.additional != CompiledSchema::kNoNode;
  if (buf_over_) return true;  // already no declared property: any key may go on
  if (buf_.size() >= kMaxKeyBytes && !undeclared_ok) return false;
  buf_.push_back(static_cast<char>(c));
  for (size_t i = 0; i < n.property_keys.size(); ++i) {
    const std::string& k = n.property_keys[i];
    if (!(f.seen >> i & 1) && k.size() >= buf_.size() && k.compare(0, buf_.size(), buf_) == 0) return true;
  }
  if (!undeclared_ok) {
    buf_.pop_back();
    return false;
  }
  // An undeclared key: forget its bytes, so that the state (the masker's cache key) stays
  // the same for the rest of it.
  buf_.clear();
  buf_over_ = true;
  return true;
}

// The closing quote of a key: which property it names.
bool JsonMatcher::close_key() {
  Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  uint16_t prop = kUndeclared;
  if (!buf_over_) {
    for (size_t i = 0; i < n.property_keys.size(); ++i)
      if (n.property_keys[i] == buf_) prop = static_cast<uint16_t>(i);
  }
  if (prop != kUndeclared && (f.seen >> prop & 1)) return false;  // a key twice
  if (prop == kUndeclared && n.additional == CompiledSchema::kNoNode) return false;
  f.prop = prop;
  value_node_ = prop == kUndeclared ? n.additional : n.property_nodes[prop];
  buf_.clear();
  mode_ = Mode::colon;
  return true;
}

// The byte after a value, a key or a structural character (never inside a string or number).
bool JsonMatcher::feed_structural(uint8_t c) {
  switch (mode_) {
    case Mode::start:
    case Mode::value:
      return begin_value(c) || whitespace(c);
    case Mode::value_or_close: {
      const Frame& f = frames_[depth_ - 1];
      if (c == ']') {
        if (node(f.node).min_items > 0) return false;
        --depth_;
        end_value();
        return true;
      }
      if (is_ws(c)) return whitespace(c);
      return node(f.node).max_items > 0 && begin_value(c);
    }
    case Mode::key_or_close:
      if (c == '}') {
        if (node(frames_[depth_ - 1].node).required != 0) return false;
        --depth_;
        end_value();
        return true;
      }
      [[fallthrough]];
    case Mode::key:
      if (c != '"') return whitespace(c);
      return begin_key();
    case Mode::colon:
      if (c != ':') return whitespace(c);
      mode_ = Mode::value;
      return true;
    case Mode::after_value: {
      Frame& f = frames_[depth_ - 1];
      const SchemaNode& n = node(f.node);
      if (c == ',') {
        if (f.open == '{') {
          if (!can_add_property(f)) return false;
          mode_ = Mode::key;
        } else {
          if (f.count >= n.max_items) return false;
          mode_ = Mode::value;
          value_node_ = n.items;
        }
        return true;
      }
      if (f.open == '{' && c == '}') {
        if ((f.seen & n.required) != n.required) return false;
        --depth_;
        end_value();
        return true;
      }
      if (f.open == '[' && c == ']') {
        if (f.count < n.min_items) return false;
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

// Inside a string (string, escape or unicode mode).
bool JsonMatcher::feed_string(uint8_t c) {
  if (mode_ == Mode::string && c == '"') {
    if (key_) return close_key();
    end_value();
    return true;
  }
  bool ok = false;
  switch (mode_) {
    case Mode::string:
      if (c == '\\') {
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
    default:  // unicode
      if (is_hex(c)) {
        if (++aux_ == 4) mode_ = Mode::string;
        ok = true;
      }
      break;
  }
  return ok && (!key_ || key_byte(c));
}

bool JsonMatcher::feed(uint8_t c) {
  const JsonMatcher before = *this;
  bool ok = false;
  switch (mode_) {
    case Mode::string:
    case Mode::escape:
    case Mode::unicode:
      ok = feed_string(c);
      break;
    case Mode::literal: {
      const std::string_view lit = kLiterals[aux_];
      if (c == static_cast<uint8_t>(lit[aux2_])) {
        if (++aux2_ == lit.size()) end_value();
        ok = true;
      }
      break;
    }
    case Mode::enum_value: {
      const auto& values = node(value_node_).enum_values;
      const EnumRange now = prefix_range(values, buf_);
      const bool exact = !now.empty() && *now.begin == buf_;
      buf_.push_back(static_cast<char>(c));
      const EnumRange next = prefix_range(values, buf_);
      if (!next.empty()) {
        ok = true;
        // A complete value that nothing can extend ends at once (a string's closing quote).
        if (*next.begin == buf_ && next.end - next.begin == 1) end_enum_value();
      } else {
        buf_.pop_back();
        if (exact) {
          end_enum_value();
          ok = feed_structural(c);
        }
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
      } else if (c == '.' && !int_only_ && (mode_ == Mode::num_zero || mode_ == Mode::num_int)) {
        mode_ = Mode::num_frac_start;
        ok = true;
      } else if ((c == 'e' || c == 'E') && !int_only_ && mode_ != Mode::num_exp) {
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
  k.append(reinterpret_cast<const char*>(&schema_->id), sizeof(schema_->id));
  const uint8_t head[] = {static_cast<uint8_t>(mode_), key_, int_only_, buf_over_, aux_, aux2_, ws_run_, depth_};
  k.append(reinterpret_cast<const char*>(head), sizeof(head));
  k.append(reinterpret_cast<const char*>(&value_node_), sizeof(value_node_));
  k.append(reinterpret_cast<const char*>(frames_.data()), depth_ * sizeof(Frame));
  k.push_back('|');
  k += buf_;
  return k;
}

}  // namespace troupe::structured
