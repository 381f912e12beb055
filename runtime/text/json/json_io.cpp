#include "runtime/text/json/json_io.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace troupe::json_io {

namespace {

using json = nlohmann::json;

/// A SAX pass that only records where and why the text stops being JSON.
class ErrorFinder final : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    // The parser counts characters read, so the failing one is position - 1.
    error.offset = position > 0 ? position - 1 : 0;
    // "[json.exception.parse_error.101] parse error at line 1, column 6: ...": keep what follows the tag.
    std::string_view what = ex.what();
    const size_t tag = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && tag != std::string_view::npos) what.remove_prefix(tag + 2);
    error.message = printable(what, 240);
    return false;
  }
  ParseError error{0, "invalid JSON"};
};

}  // namespace

std::string printable(std::string_view s, size_t limit) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > limit) out += "...";
  return out;
}

std::optional<uint64_t> non_negative_integer(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

json parse(std::string_view text, ParseError* error) {
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() && error != nullptr) {
    ErrorFinder finder;
    (void)json::sax_parse(text.begin(), text.end(), &finder);
    finder.error.offset = std::min<uint64_t>(finder.error.offset, text.size());
    *error = std::move(finder.error);
  }
  return value;
}

Result<json> read_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return not_found(path + ": no such file");
    return invalid_argument(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return invalid_argument(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return invalid_argument(path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                            std::to_string(max_bytes) + " a JSON file may have here");
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_argument(path + ": cannot open: " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return invalid_argument(path + ": read error");
  ParseError error;
  json value = parse(text, &error);
  if (value.is_discarded()) {
    return data_loss(path + ": not valid JSON at byte " + std::to_string(error.offset) + ": " + error.message);
  }
  return value;
}

}  // namespace troupe::json_io
