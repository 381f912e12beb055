#include "runtime/text/tokenizer/incremental_decoder.hpp"

#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::tokenizer {

std::string IncrementalDecoder::push(int32_t id) {
  pending_ += tok_->token_to_piece(id, !skip_special_);
  const size_t done = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, done);
  pending_.erase(0, done);
  return out;
}

std::string IncrementalDecoder::flush() {
  if (pending_.empty()) return {};
  pending_.clear();
  return "\xEF\xBF\xBD";  // U+FFFD for the unfinished character
}

}  // namespace troupe::tokenizer
