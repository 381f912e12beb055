// JSON Schema `format` values as regexes over a string's characters (ECMAScript
// syntax, matched whole): date-time, date, time, duration (RFC 3339 and its
// appendix A), email (a dot-atom local part at a host name), hostname (RFC
// 1123, 253 characters at most), ipv4, ipv6 (RFC 4291 text forms, no zone),
// uri and uri-reference (RFC 3986's grammar), uuid. Days are checked against
// their month, 29 February against leap years; also iri, iri-reference,
// json-pointer, relative-json-pointer. The other standard formats (regex,
// uri-template, idn-email, idn-hostname) are refused; formats the standard does
// not define are annotations and are not enforced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::structured {

/// The patterns a string of `format` must all match (full match), or empty for a format
/// this compiler does not enforce.
std::vector<std::string> format_patterns(std::string_view format);
/// A format the JSON Schema standard defines that format_patterns does not enforce.
bool is_unenforced_standard_format(std::string_view format);

}  // namespace troupe::structured
