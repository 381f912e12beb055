// nlohmann::json without exceptions: parse failures come back with the byte
// offset and the parser's reason, and whole files are read with their path in
// every error. Used by the readers of Hugging Face files (safetensors headers,
// tokenizer.json, config.json).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/status.hpp"

namespace troupe::json_io {

struct ParseError {
  uint64_t offset = 0;  // byte offset into the text where parsing failed
  std::string message;  // the parser's reason, printable ("syntax error while parsing ...")
};

/// Parses `text` (strict: nothing but whitespace may follow the value). On
/// failure returns a discarded value (is_discarded()) and fills *error.
nlohmann::json parse(std::string_view text, ParseError* error);

/// Reads and parses the JSON file at `path`. Errors name the path: not_found
/// ("<path>: no such file"), invalid_argument (unreadable, not a regular file,
/// larger than max_bytes), data_loss ("<path>: not valid JSON at byte N: ...").
Result<nlohmann::json> read_file(const std::string& path, uint64_t max_bytes = uint64_t{1} << 30);

/// A JSON integer >= 0 (parsed as unsigned, or built in code as a signed
/// integer), else nullopt: negative numbers, floats, anything else.
std::optional<uint64_t> non_negative_integer(const nlohmann::json& v);

/// Printable, shortened text for messages about untrusted strings.
std::string printable(std::string_view s, size_t limit = 96);

}  // namespace troupe::json_io
