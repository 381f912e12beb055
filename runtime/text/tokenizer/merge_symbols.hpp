// The linked list of symbols that both merge-based tokenizers (SPM and BPE)
// start from: one symbol per UTF-8 character of the text.
#pragma once

#include <string_view>
#include <vector>

namespace troupe::tokenizer {

struct Symbol {
  int prev, next;     // neighbours in the list, -1 at the ends
  size_t offset, n;   // bytes of the text this symbol covers
};

/// One symbol per UTF-8 character (a stray byte is a character of its own).
std::vector<Symbol> utf8_symbols(std::string_view text);

}  // namespace troupe::tokenizer
