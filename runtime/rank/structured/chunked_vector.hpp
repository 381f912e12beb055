// A grow-only array whose elements never move: chunks of 2^kChunkBits slots
// under a top-level table sized once for the largest count allowed. One writer
// (holding the owner's lock) appends; readers index published elements without
// a lock (the size is published with release order after the element is filled).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace troupe::structured {

template <class T, size_t kChunkBits = 10>
class ChunkedVector {
 public:
  static constexpr size_t kChunk = size_t{1} << kChunkBits;

  explicit ChunkedVector(size_t max_size) : chunks_((max_size + kChunk - 1) / kChunk) {}

  size_t capacity() const { return chunks_.size() * kChunk; }
  size_t size() const { return size_.load(std::memory_order_acquire); }
  T& operator[](size_t i) const { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }

  /// The next slot (default-constructed), to fill before publish(); nullptr when full.
  T* next_slot() {
    size_t i = size_.load(std::memory_order_relaxed);
    if (i >= capacity()) return nullptr;
    auto& chunk = chunks_[i >> kChunkBits];
    if (!chunk) {
      chunk = std::make_unique<T[]>(kChunk);
      ++allocated_;
    }
    return &chunk[i & (kChunk - 1)];
  }
  /// Makes the slot from next_slot() visible; returns its index.
  size_t publish() { return size_.fetch_add(1, std::memory_order_release); }
  size_t allocated_chunks() const { return allocated_; }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::atomic<size_t> size_{0};
  size_t allocated_ = 0;  // chunks made (by the writer)
};

}  // namespace troupe::structured
