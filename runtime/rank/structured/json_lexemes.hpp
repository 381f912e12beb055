// The lexemes of JSON text as regex terms: punctuation with the whitespace
// allowed around it, object keys with their colon, strings (length bounds in
// characters, patterns with search semantics, formats), numbers (with exact
// bounds) and literals. Inside a string a character is written raw, or escaped
// (\" \\ \/ \b \f \n \r \t \uXXXX, a surrogate pair counting as one character);
// a string with a pattern or format takes its characters raw except `"`, `\`
// and control characters, which are escaped (an output never needs other escapes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/rank/structured/codepoint_set.hpp"
#include "runtime/rank/structured/number_ranges.hpp"
#include "runtime/rank/structured/regex_expr.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

struct StringConstraints {
  uint64_t min_length = 0;
  std::optional<uint64_t> max_length;
  std::vector<std::string> patterns;  // ECMAScript, search semantics; all must match
  std::vector<std::string> formats;   // enforced formats (json_formats.hpp); all must match
};

struct NumberConstraints {
  bool integer = false;
  std::optional<NumberBound> lower, upper;
};

class JsonLexemes {
 public:
  /// whitespace: the regex of a run of whitespace between tokens (may match empty).
  JsonLexemes(ExprStore& store, ExprId whitespace);

  ExprStore& store() { return s_; }
  ExprId open_object() const { return open_object_; }
  ExprId close_object() const { return close_object_; }
  ExprId open_array() const { return open_array_; }
  ExprId close_array() const { return close_array_; }
  ExprId comma() const { return comma_; }
  ExprId colon() const { return colon_; }

  /// Any one character inside a string, in any of its encodings.
  ExprId any_char() const { return any_char_; }
  /// The encodings of the characters of `set` inside a string (raw, or escaped when needed).
  /// canonical: only the one Python's json.dumps writes (keys compared by their text need it).
  ExprId chars(const CodepointSet& set, bool canonical = false);
  ExprId quoted(ExprId content) { return s_.concat(s_.concat(s_.byte('"'), content), s_.byte('"')); }
  /// A string value (with its quotes); errors name a bad pattern.
  Result<ExprId> string(const StringConstraints& c);
  /// The characters of a string matching the constraints (no quotes); canonical: each string
  /// in exactly one encoding.
  Result<ExprId> string_content(const StringConstraints& c, bool canonical = false);
  ExprId number(const NumberConstraints& c);
  /// `"key"` then the colon.
  ExprId key(std::string_view key_utf8);

 private:
  ExprStore& s_;
  ExprId ws_, open_object_, close_object_, open_array_, close_array_, comma_, colon_;
  ExprId any_char_;
};

}  // namespace troupe::structured
