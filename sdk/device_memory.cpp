#include "troupe/device_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace troupe {

Status DeviceAllocator::copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t row_bytes,
                                int64_t rows, CopyKind kind) {
  if (row_bytes < 0 || rows < 0 || dst_pitch < row_bytes || src_pitch < row_bytes)
    return invalid_argument("copy_2d: pitches must hold a row and sizes must not be negative");
  for (int64_t r = 0; r < rows; ++r)
    TROUPE_RETURN_IF_ERROR(copy(static_cast<uint8_t*>(dst) + r * dst_pitch,
                                static_cast<const uint8_t*>(src) + r * src_pitch, row_bytes, kind));
  return {};
}

Status DeviceAllocator::fill_zero(void* dst, int64_t bytes) {
  if (bytes < 0) return invalid_argument("fill_zero: negative size");
  static const std::vector<uint8_t> zeros(int64_t{1} << 16, 0);
  const auto chunk = static_cast<int64_t>(zeros.size());
  for (int64_t at = 0; at < bytes; at += chunk)
    TROUPE_RETURN_IF_ERROR(copy(static_cast<uint8_t*>(dst) + at, zeros.data(), std::min(chunk, bytes - at),
                                CopyKind::host_to_device));
  return {};
}

namespace {

class HostBuffer final : public DeviceBuffer {
 public:
  HostBuffer(void* p, int64_t n, std::atomic<int64_t>* live) : p_(p), n_(n), live_(live) { *live_ += n_; }
  ~HostBuffer() override {
    std::free(p_);
    *live_ -= n_;
  }
  void* data() override { return p_; }

 private:
  void* p_;
  int64_t n_;
  std::atomic<int64_t>* live_;
};

class HostAllocator final : public DeviceAllocator {
 public:
  std::string name() const override { return "host"; }
  bool host_addressable() const override { return true; }
  Result<std::unique_ptr<DeviceBuffer>> allocate(int64_t bytes) override {
    if (bytes <= 0) return invalid_argument("host allocation of " + std::to_string(bytes) + " bytes");
    constexpr int64_t kAlign = 64;
    const int64_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, static_cast<size_t>(rounded));
    if (p == nullptr)
      return resource_exhausted("host memory: cannot allocate " + std::to_string(bytes) + " bytes");
    return std::unique_ptr<DeviceBuffer>(new HostBuffer(p, bytes, &live_));
  }
  Status copy(void* dst, const void* src, int64_t bytes, CopyKind /*kind*/) override {
    if (bytes < 0) return invalid_argument("copy: negative size");
    if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
    return {};
  }
  Status fill_zero(void* dst, int64_t bytes) override {
    if (bytes < 0) return invalid_argument("fill_zero: negative size");
    std::memset(dst, 0, static_cast<size_t>(bytes));
    return {};
  }
  int64_t allocated_bytes() const override { return live_.load(); }

 private:
  std::atomic<int64_t> live_{0};
};

}  // namespace

std::unique_ptr<DeviceAllocator> make_host_allocator() { return std::make_unique<HostAllocator>(); }

Result<WeightTensor> DeviceWeights::place(const WeightTensor& host) {
  if (allocator_->host_addressable() || host.data == nullptr) return host;
  const auto key = std::make_pair(host.data, static_cast<int64_t>(host.nbytes));
  const int64_t packed_row = row_bytes(host.type, host.ne[0]);
  if (packed_row <= 0) return invalid_argument("weight '" + host.name + "' has rows that are not whole blocks");
  WeightTensor placed = host;
  placed.row_stride = 0;
  placed.nbytes = static_cast<uint64_t>(packed_row * host.rows());
  if (auto it = placed_.find(key); it != placed_.end()) {
    placed.data = it->second;
    return placed;
  }
  auto buffer = allocator_->allocate(static_cast<int64_t>(placed.nbytes));
  if (!buffer.ok())
    return Status(buffer.status().code(), "weight '" + host.name + "' on " + allocator_->name() + ": " +
                                              buffer.status().message());
  void* dst = (*buffer)->data();
  const bool strided = host.row_stride > 0 && host.row_stride != packed_row;
  const Status copied =
      strided ? allocator_->copy_2d(dst, packed_row, host.data, host.row_stride, packed_row, host.rows(),
                                    CopyKind::host_to_device)
              : allocator_->copy(dst, host.data, static_cast<int64_t>(placed.nbytes), CopyKind::host_to_device);
  TROUPE_RETURN_IF_ERROR(copied);
  placed.data = dst;
  placed_.emplace(key, dst);
  bytes_ += static_cast<int64_t>(placed.nbytes);
  buffers_.push_back(std::move(*buffer));
  return placed;
}

}  // namespace troupe
