// A byte-at-a-time recognizer of one JSON object (RFC 8259), for structured
// outputs (OpenAI's response_format {"type": "json_object"}): it says whether
// a byte may come next and whether the text so far is a whole object. The
// state is a small value, cheap to copy, so the token masker can try every
// token of the vocabulary from the same state.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::structured {

class JsonMatcher {
 public:
  /// Containers nested deeper than this are refused (the output stays bounded in state).
  static constexpr int kMaxDepth = 32;
  /// Longest run of whitespace between tokens: keeps a model from padding forever.
  static constexpr int kMaxWhitespaceRun = 32;

  /// Advances by one byte; false (and the state unchanged) when the byte cannot come next.
  bool feed(uint8_t c);
  /// Advances by every byte of `text`; false (state unspecified) when one cannot come next.
  bool feed(std::string_view text);
  /// The text so far is one whole JSON object: only the end of the output may follow.
  bool complete() const { return mode_ == Mode::done; }
  /// The state as bytes: equal keys accept the same continuations (the masker's cache key).
  std::string key() const;

 private:
  enum class Mode : uint8_t {
    start,          // before the top-level object: whitespace or '{'
    value,          // a value must come (after ':' or ',' in an array)
    value_or_close, // after '[': a value or ']'
    key_or_close,   // after '{': a key or '}'
    key,            // after ',' in an object: a key
    colon,          // after a key
    after_value,    // after a value in a container: ',' or its closer
    string,         // inside a string (key_ says which kind)
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
    done,           // the top-level object is closed
  };

  bool feed_structural(uint8_t c);
  bool begin_value(uint8_t c);
  void end_value();  // a value ended: after_value inside a container, done at the top
  bool whitespace(uint8_t c);

  Mode mode_ = Mode::start;
  bool key_ = false;       // the string being read is an object key
  uint8_t aux_ = 0;
  uint8_t aux2_ = 0;
  uint8_t ws_run_ = 0;
  uint8_t depth_ = 0;
  std::array<uint8_t, kMaxDepth> stack_{};  // '{' or '[' per open container
};

}  // namespace troupe::structured
