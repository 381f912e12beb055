// Device memory: what a platform allocates and how bytes move to and from it,
// in the spirit of ggml's buffer types and CTranslate2's StorageView. Models
// keep their weights and activations in it; only the platform's Ops,
// AttentionBackend and DeviceCommunicator read or write through a device
// address. The CPU platform goes through the same interface with host memory
// (host_addressable), so nothing is copied there.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// The direction of a copy; "device" is the allocator's device.
enum class CopyKind { host_to_device, device_to_host, device_to_device };

/// A block of device memory, freed with the object.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  /// The device address of the first byte (aligned to at least 64 bytes); never null.
  virtual void* data() = 0;
};

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  /// Names the memory in logs and errors ("host", "cuda:0", "sim:0").
  virtual std::string name() const = 0;
  /// True when a device address is a host address (the CPU): weights are used where the
  /// file is mapped, and a worker may let the model write logits straight into host memory.
  virtual bool host_addressable() const = 0;
  /// `bytes` (> 0) of device memory; resource_exhausted when the device has no room.
  virtual Result<std::unique_ptr<DeviceBuffer>> allocate(int64_t bytes) = 0;
  /// Copies `bytes` in the direction `kind`, ordered after every kernel the platform has
  /// launched on the same device; a copy to the host returns once the bytes are there.
  virtual Status copy(void* dst, const void* src, int64_t bytes, CopyKind kind) = 0;
  /// `rows` rows of `row_bytes` each, from `src` every `src_pitch` bytes to `dst` every
  /// `dst_pitch` bytes (cudaMemcpy2D). The default copies row by row through copy().
  virtual Status copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t row_bytes,
                         int64_t rows, CopyKind kind);
  /// Sets `bytes` of device memory at `dst` to zero. The default copies zeros from the host.
  virtual Status fill_zero(void* dst, int64_t bytes);
  /// Bytes this allocator holds now (live buffers).
  virtual int64_t allocated_bytes() const = 0;
};

/// Ordinary aligned host memory: the allocator of the CPU platform, and the default of
/// Platform::make_allocator. Copies are memcpy.
std::unique_ptr<DeviceAllocator> make_host_allocator();

/// `count` elements of T in device memory: an owning, typed view of a DeviceBuffer.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  T* data() { return buffer_ ? static_cast<T*>(buffer_->data()) : nullptr; }
  const T* data() const { return buffer_ ? static_cast<const T*>(buffer_->data()) : nullptr; }
  int64_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  /// Allocates `count` elements (count > 0) of `allocator`; the previous contents are dropped.
  Status allocate(DeviceAllocator& allocator, int64_t count) {
    buffer_.reset();
    count_ = 0;
    if (count <= 0) return invalid_argument("a device array needs at least one element");
    auto made = allocator.allocate(count * static_cast<int64_t>(sizeof(T)));
    if (!made.ok()) return made.status();
    buffer_ = std::move(*made);
    count_ = count;
    return {};
  }
  /// Makes room for at least `count` elements, keeping nothing: allocates only to grow.
  Status reserve(DeviceAllocator& allocator, int64_t count) {
    return count <= count_ ? Status{} : allocate(allocator, count);
  }

 private:
  std::unique_ptr<DeviceBuffer> buffer_;
  int64_t count_ = 0;
};

/// The weights a model placed on its device. place() gives the view the platform's ops
/// read: on a host-addressable allocator the view as it is (the mapped file, no copy);
/// otherwise a packed copy in device memory (a strided column slice loses its stride).
/// A view placed twice (a tied output head) is copied once.
class DeviceWeights {
 public:
  explicit DeviceWeights(DeviceAllocator& allocator) : allocator_(&allocator) {}
  Result<WeightTensor> place(const WeightTensor& host);
  /// Bytes of device memory the placed weights take (0 on a host-addressable allocator).
  int64_t device_bytes() const { return bytes_; }
  DeviceAllocator& allocator() const { return *allocator_; }

 private:
  DeviceAllocator* allocator_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  std::map<std::pair<const void*, int64_t>, const void*> placed_;  // (host data, nbytes) -> device data
  int64_t bytes_ = 0;
};

}  // namespace troupe
