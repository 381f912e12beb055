// Streaming detokenization: feed ids one at a time and get back only text
// that is complete UTF-8, so a character split across tokens is never torn.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/text/tokenizer/tokenizer.hpp"

namespace troupe::tokenizer {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special = true)
      : tok_(&tok), skip_special_(skip_special) {}

  /// Text made complete by this token (possibly empty while a character is pending).
  std::string push(int32_t id);
  /// Whatever is still pending; an unfinished character becomes U+FFFD.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;  // at most 3 bytes of an unfinished UTF-8 sequence
};

}  // namespace troupe::tokenizer
