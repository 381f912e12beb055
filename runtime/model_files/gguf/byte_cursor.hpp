// A bounds-checked little-endian reader over a byte range. Every read first
// checks what is left, so a parser built on it cannot over-read whatever the
// input claims; the caller turns a failed read into a Status with context.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace troupe::gguf::detail {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian fields as they are");

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  /// Reads a trivially copyable field; false (nothing consumed) when too few bytes are left.
  template <class T>
  bool read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool skip(uint64_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }

  /// Reads a GGUF string (uint64 length, then bytes). `*claimed_len` receives
  /// the length field even on failure so the caller can report it.
  bool read_string(std::string_view* out, uint64_t* claimed_len) {
    uint64_t len = 0;
    if (!read(&len)) {
      *claimed_len = 0;
      return false;
    }
    *claimed_len = len;
    if (remaining() < len) {
      pos_ -= sizeof(len);
      return false;
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace troupe::gguf::detail
