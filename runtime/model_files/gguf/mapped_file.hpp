// A read-only, private memory mapping of a whole file (POSIX mmap). The file
// descriptor is closed once mapped; the mapping lives until destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "troupe/status.hpp"

namespace troupe::gguf::detail {

class MappedFile {
 public:
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// Maps `path`; not_found when it does not exist, invalid_argument when it
  /// is not a regular non-empty readable file.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  /// Lets the kernel drop the resident pages (madvise MADV_DONTNEED); reading them again
  /// faults them back in from the file.
  Status release_pages() const;
  uint64_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace troupe::gguf::detail
