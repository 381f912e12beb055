#include "runtime/text/json/python_json.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace troupe::json_io {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX": the shortest round-trip digits
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  int exponent = std::atoi(sci.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int point = exponent + 1;  // digits before the decimal point
  std::string out = negative ? "-" : "";
  if (point <= -4 || point > 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + ebuf;
  }
  if (point <= 0) return out + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (static_cast<size_t>(point) >= digits.size()) {
    return out + digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

std::string python_json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

namespace {

void dump(const nlohmann::ordered_json& v, bool compact, std::string& out) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: out += "null"; break;
    case nlohmann::json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case nlohmann::json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case nlohmann::json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case nlohmann::json::value_t::number_float: out += python_float_repr(v.get<double>()); break;
    case nlohmann::json::value_t::string: out += python_json_string(v.get_ref<const std::string&>()); break;
    case nlohmann::json::value_t::array: {
      out += "[";
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += compact ? "," : ", ";
        first = false;
        dump(e, compact, out);
      }
      out += "]";
      break;
    }
    case nlohmann::json::value_t::object: {
      out += "{";
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += compact ? "," : ", ";
        first = false;
        out += python_json_string(k);
        out += compact ? ":" : ": ";
        dump(e, compact, out);
      }
      out += "}";
      break;
    }
    default: out += "null"; break;  // binary and discarded values do not come from JSON text
  }
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& value, bool compact) {
  std::string out;
  dump(value, compact, out);
  return out;
}

}  // namespace troupe::json_io
