#include "runtime/rank/structured/json_formats.hpp"

namespace troupe::structured {
namespace {

const std::string kYear = "(?:[1-9]\\d{3}|0[1-9]\\d{2}|00[1-9]\\d|000[1-9])";
// Years divisible by 4 and not by 100, or by 400 (year 0 excluded).
const std::string kLeapYear = "(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][48]|[2468]0|[13579][26])00)";
const std::string kMonthDay =
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))";
const std::string kDate = "(?:" + kYear + "-" + kMonthDay + "|" + kLeapYear + "-02-29)";
const std::string kTime = "(?:[01]\\d|2[0-3]):[0-5]\\d:(?:[0-5]\\d|60)(?:\\.\\d+)?(?:[Zz]|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
const std::string kDuration =
    "P(?:(?:\\d+D|\\d+M(?:\\d+D)?|\\d+Y(?:\\d+M(?:\\d+D)?)?)(?:T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S))?"
    "|T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S)|\\d+W)";
const std::string kOctet = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const std::string kIpv4 = kOctet + "(?:\\." + kOctet + "){3}";
const std::string kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const std::string kHostname = kLabel + "(?:\\." + kLabel + ")*";
const std::string kAtext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const std::string kEmail = kAtext + "+(?:\\." + kAtext + "+)*@" + kHostname;
const std::string kUuid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

// Every RFC 4291 text form: eight groups, or "::" standing for one or more zero groups,
// optionally ending in a dotted IPv4 address (two groups' worth).
std::string ipv6() {
  const std::string h = "[0-9a-fA-F]{1,4}";
  auto groups = [&](int n) {  // n groups joined by ':'
    if (n == 0) return std::string();
    return h + (n > 1 ? "(?::" + h + "){" + std::to_string(n - 1) + "}" : "");
  };
  std::vector<std::string> alts{groups(8), groups(6) + ":" + kIpv4};
  for (int tail_v4 = 0; tail_v4 < 2; ++tail_v4) {
    const int room = tail_v4 ? 5 : 7;  // explicit groups beside "::"
    for (int left = 0; left <= room; ++left) {
      for (int right = 0; left + right <= room; ++right) {
        std::string r = groups(right);
        if (tail_v4) r += (right ? ":" : "") + kIpv4;
        alts.push_back(groups(left) + "::" + r);
      }
    }
  }
  std::string out = "(?:";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? "|" : "") + alts[i];
  return out + ")";
}

// RFC 3986, section 3 and 4.2; with `iri`, RFC 3987's IRIs (ucschar in the unreserved
// characters, iprivate in queries).
struct Uri {
  explicit Uri(bool iri = false)
      : unreserved(std::string("A-Za-z0-9\\-._~") +
                   (iri ? "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF\\u{10000}-\\u{1FFFD}\\u{20000}-\\u{2FFFD}"
                          "\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}"
                          "\\u{70000}-\\u{7FFFD}\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}"
                          "\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}\\u{E1000}-\\u{EFFFD}"
                        : "")),
        query_extra(iri ? "\\uE000-\\uF8FF\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}" : "") {}
  std::string unreserved;
  std::string query_extra;
  std::string sub_delims = "!$&'()*+,;=";
  std::string pct = "%[0-9A-Fa-f]{2}";
  std::string pchar = "(?:[" + unreserved + sub_delims + ":@]|" + pct + ")";
  std::string segment = pchar + "*";
  std::string segment_nz = pchar + "+";
  std::string segment_nz_nc = "(?:[" + unreserved + sub_delims + "@]|" + pct + ")+";
  std::string query = "(?:" + pchar + "|[/?" + query_extra + "])*";
  std::string authority = "(?:(?:[" + unreserved + sub_delims + ":]|" + pct + ")*@)?(?:\\[" + ipv6() + "\\]|" + kIpv4 +
                          "|(?:[" + unreserved + sub_delims + "]|" + pct + ")*)(?::\\d*)?";
  std::string path_abempty = "(?:/" + segment + ")*";
  std::string path_absolute = "/(?:" + segment_nz + "(?:/" + segment + ")*)?";
  std::string path_rootless = segment_nz + "(?:/" + segment + ")*";
  std::string path_noscheme = segment_nz_nc + "(?:/" + segment + ")*";
  std::string tail = "(?:\\?" + query + ")?(?:#" + query + ")?";

  std::string uri() const {
    return "[A-Za-z][A-Za-z0-9+.-]*:(?://" + authority + path_abempty + "|" + path_absolute + "|" + path_rootless +
           "|)" + tail;
  }
  std::string relative() const {
    return "(?://" + authority + path_abempty + "|" + path_absolute + "|" + path_noscheme + "|)" + tail;
  }
};

}  // namespace

std::vector<std::string> format_patterns(std::string_view format) {
  if (format == "date-time") return {kDate + "[Tt]" + kTime};
  if (format == "date") return {kDate};
  if (format == "time") return {kTime};
  if (format == "duration") return {kDuration};
  if (format == "email") return {kEmail};
  if (format == "hostname") return {kHostname, "[^]{1,253}"};
  if (format == "ipv4") return {kIpv4};
  if (format == "ipv6") return {ipv6()};
  if (format == "uuid") return {kUuid};
  if (format == "uri") return {Uri().uri()};
  if (format == "uri-reference" || format == "iri-reference") {
    Uri u(format == "iri-reference");
    return {"(?:" + u.uri() + "|" + u.relative() + ")"};
  }
  if (format == "iri") return {Uri(true).uri()};
  if (format == "json-pointer") return {"(?:/(?:[^~/]|~[01])*)*"};
  if (format == "relative-json-pointer") return {"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)"};
  return {};
}

bool is_unenforced_standard_format(std::string_view format) {
  return format == "regex" || format == "uri-template" || format == "idn-email" || format == "idn-hostname";
}

}  // namespace troupe::structured
