// JSON values as text the way Python's json.dumps(ensure_ascii=False) writes
// them: floats as Python's repr (shortest round trip; exponent form below 1e-4
// and from 1e16), strings with only `"`, `\` and control characters escaped,
// separators ", " and ": " (or compact ones). The grammar engine's enum and
// const literals and keys, Jinja's tojson, and the MaskBench harness (whose
// instances are serialized that way) use it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace troupe::json_io {

/// Python's repr of a float ("1.0", "0.1", "1e-05", "1e+16", "-0.0").
std::string python_float_repr(double value);
/// A string literal with its quotes, escaped as json.dumps(ensure_ascii=False) does.
std::string python_json_string(std::string_view utf8);
/// json.dumps(value, ensure_ascii=False): separators ", " / ": ", or "," / ":" when compact.
std::string python_json_dumps(const nlohmann::ordered_json& value, bool compact = false);

}  // namespace troupe::json_io
