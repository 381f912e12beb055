#include "net/basp_frames.hpp"

#include <algorithm>

namespace troupe::net {

bool BaspFrameCheck::feed(const uint8_t* data, size_t n) {
  if (!error_.empty()) return false;
  while (n > 0) {
    if (payload_left_ > 0) {
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(payload_left_, n));
      payload_left_ -= skip;
      data += skip;
      n -= skip;
      if (payload_left_ == 0) ++messages_;
      continue;
    }
    const size_t take = std::min(n, kBaspHeaderBytes - header_have_);
    std::copy(data, data + take, header_ + header_have_);
    header_have_ += take;
    data += take;
    n -= take;
    if (header_have_ < kBaspHeaderBytes) break;
    header_have_ = 0;
    const uint8_t op = header_[0];
    const uint32_t len = uint32_t{header_[4]} << 24 | uint32_t{header_[5]} << 16 | uint32_t{header_[6]} << 8 |
                         uint32_t{header_[7]};
    if (op > kBaspLastOperation) {
      error_ = "not a BASP message (operation " + std::to_string(op) + ")";
      return false;
    }
    if (len > max_payload_) {
      error_ = "a BASP message of " + std::to_string(len) + " bytes (at most " + std::to_string(max_payload_) + ")";
      return false;
    }
    payload_left_ = len;
    if (len == 0) ++messages_;
  }
  return true;
}

}  // namespace troupe::net
