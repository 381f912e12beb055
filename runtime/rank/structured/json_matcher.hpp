// A byte-at-a-time recognizer of one JSON object (RFC 8259) that a compiled
// JSON schema admits, for structured outputs (OpenAI's response_format
// json_object, which is the schema "any object", and json_schema): it says
// whether a byte may come next and whether the text so far is a whole object.
// The state is a small value, cheap to copy, so the token masker can try every
// token of the vocabulary from the same state.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rank/structured/json_schema.hpp"

namespace troupe::structured {

class JsonMatcher {
 public:
  /// Containers nested deeper than this are refused (the output stays bounded in state).
  static constexpr int kMaxDepth = 32;
  /// Longest run of whitespace between tokens: keeps a model from padding forever.
  static constexpr int kMaxWhitespaceRun = 20;  // a newline and 4-space indents 4 deep fit

  /// Any object (json_object).
  JsonMatcher();
  /// An object `schema` admits; the schema must outlive the matcher and its copies.
  explicit JsonMatcher(const CompiledSchema* schema);

  /// Advances by one byte; false (and the state unchanged) when the byte cannot come next.
  bool feed(uint8_t c);
  /// Advances by every byte of `text`; false (state unspecified) when one cannot come next.
  bool feed(std::string_view text);
  /// The text so far is one whole object: only the end of the output may follow.
  bool complete() const { return mode_ == Mode::done; }
  /// Inside a string whose content is free (a value, or a key no declared property can
  /// still match): any byte but a quote, a backslash and control characters keeps the state.
  bool in_free_string() const { return mode_ == Mode::string && (!key_ || buf_over_); }
  /// The state as bytes: equal keys (of matchers of the same schema) accept the same
  /// continuations (the masker's cache key).
  std::string key() const;

 private:
  enum class Mode : uint8_t {
    start,          // before the top-level object: whitespace or its first byte
    value,          // a value of node value_node_ must come (after ':' or ',' in an array)
    value_or_close, // after '[': a value or ']'
    key_or_close,   // after '{': a key or '}'
    key,            // after ',' in an object: a key
    colon,          // after a key
    after_value,    // after a value in a container: ',' or its closer
    string,         // inside a string (key_ says whether it is an object key)
    escape,         // after a backslash in a string
    unicode,        // inside \uXXXX: aux_ hex digits read
    num_minus,      // after '-': a digit must come
    num_zero,       // a leading 0
    num_int,        // integer digits
    num_frac_start, // after '.': a digit must come
    num_frac,       // fraction digits
    num_exp_start,  // after 'e'/'E': sign or digit
    num_exp_sign,   // after the exponent's sign: a digit must come
    num_exp,        // exponent digits
    literal,        // inside true/false/null: aux_ = which one, aux2_ = bytes read
    enum_value,     // inside one of the node's enum values: buf_ holds the bytes so far
    done,           // the top-level object is closed
  };
  // An open container: its schema node, items or properties so far, which declared
  // properties were seen, and the property whose value is being read.
  struct Frame {
    uint16_t node = 0;
    uint16_t count = 0;
    uint16_t prop = 0;
    uint8_t open = 0;  // '{' or '['
    uint8_t unused = 0;  // (no padding: key() copies frames as bytes)
    uint32_t seen = 0;
  };
  static constexpr uint16_t kUndeclared = UINT16_MAX;  // Frame::prop of an additional property
  static constexpr size_t kMaxKeyBytes = CompiledSchema::kMaxKeyBytes;

  const SchemaNode& node(uint16_t n) const { return schema_->nodes[n]; }
  bool feed_structural(uint8_t c);
  bool feed_string(uint8_t c);
  bool begin_value(uint8_t c);
  bool begin_key();
  bool key_byte(uint8_t c);
  bool close_key();
  bool can_add_property(const Frame& f) const;
  void end_value();  // a value ended: after_value inside a container, done at the top
  void end_enum_value();  // an enum value ended; a union's tag picks its branch
  /// The values of a sorted enum that start with `prefix` (one range of it).
  struct EnumRange {
    std::vector<std::string>::const_iterator begin, end;
    bool empty() const { return begin == end; }
  };
  static EnumRange prefix_range(const std::vector<std::string>& sorted, std::string_view prefix);
  bool whitespace(uint8_t c);

  const CompiledSchema* schema_;
  Mode mode_ = Mode::start;
  bool key_ = false;       // the string being read is an object key
  bool int_only_ = false;  // the number being read must be an integer
  bool buf_over_ = false;  // the key being read is no declared property (its bytes are not kept)
  uint8_t aux_ = 0;
  uint8_t aux2_ = 0;
  uint8_t ws_run_ = 0;
  uint8_t depth_ = 0;
  uint16_t value_node_ = 0;  // the schema of the value about to start
  std::string buf_;          // a key's bytes so far, or an enum value's
  std::array<Frame, kMaxDepth> frames_{};
};

}  // namespace troupe::structured
