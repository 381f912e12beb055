#include "runtime/text/tokenizer/merge_symbols.hpp"

#include <algorithm>

#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::tokenizer {

std::vector<Symbol> utf8_symbols(std::string_view text) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  return sym;
}

}  // namespace troupe::tokenizer
