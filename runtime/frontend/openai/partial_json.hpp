// JSON text that is still being generated (a tool call's arguments as a model writes
// them): where a value ends, the members of a call object written so far, and the part
// of a value's Python json.dumps form that no later text can change, which is what a
// streamed tool call sends as its `function.arguments` fragments.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::openai {

/// End (one past) of the JSON value that starts at s[at] (no leading whitespace), or npos
/// when the text ends first or is not JSON there. A number or literal that reaches the end
/// of `s` may still grow: npos.
size_t json_value_end(std::string_view s, size_t at);

/// Python json.dumps text (ensure_ascii=False, ", " and ": ", keys in written order) of the
/// JSON value whose text so far is `partial`, as far as later text cannot change it: a
/// string's characters as they arrive (never half an escape or a UTF-8 sequence), a number
/// or literal once it ends, separators and brackets as they are written. Each call on a
/// longer text extends the previous result; for a complete value without repeated keys it
/// is python_json_dumps of the value. It stops at the first byte that cannot be JSON.
std::string stable_json_prefix(std::string_view partial);

/// A {"name": ..., <arguments key>: ...} object as far as it is written.
struct PartialJsonCall {
  std::optional<std::string> name;    // once its string is complete
  std::optional<std::string_view> arguments;  // the arguments value's text so far (maybe cut)
  bool complete = false;              // the object's closing brace was read
};
/// Reads the object at the start of `s` (whitespace aside). The arguments are the value of
/// the first of `argument_keys` (in that order of preference) the object has.
PartialJsonCall scan_json_call(std::string_view s, std::initializer_list<std::string_view> argument_keys);

}  // namespace troupe::openai
