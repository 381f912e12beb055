// A platform's parts for the kernel checks (allocator, ops, communicator) and
// the way test data crosses into its memory: put() allocates device memory and
// copies host bytes in, get() copies results out (both through the platform's
// own DeviceAllocator). Buffers live until clear() or the session's end.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "troupe/attention.hpp"
#include "troupe/communicator.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/ops.hpp"
#include "troupe/platform.hpp"

namespace troupe::conformance {

class Session {
 public:
  static Result<std::unique_ptr<Session>> open(const Platform& platform, int num_threads);

  const Platform& platform() const { return platform_; }
  const ConfigView& config() const { return config_; }
  DeviceAllocator& memory() { return *memory_; }
  Ops& ops() { return *ops_; }
  /// A fresh attention backend of the platform (for one scenario).
  Result<std::unique_ptr<AttentionBackend>> attention() const;
  /// The platform's communicator for a world of one rank.
  Result<std::unique_ptr<DeviceCommunicator>> communicator() const;

  /// Device memory holding a copy of `bytes` bytes of `host` (`bytes` > 0).
  Result<void*> put(const void* host, int64_t bytes);
  Result<float*> put(const std::vector<float>& host);
  /// `bytes` of uninitialised device memory.
  Result<void*> scratch(int64_t bytes);
  /// Copies `count` floats of device memory out (waits for the platform's kernels).
  Result<std::vector<float>> get(const float* device, int64_t count);
  Status get_bytes(void* host, const void* device, int64_t bytes);
  /// Frees every buffer put() and scratch() made.
  void clear() { buffers_.clear(); }

 private:
  Session(const Platform& platform, ConfigValues config) : platform_(platform), config_(std::move(config)) {}
  const Platform& platform_;
  ConfigValues config_;
  std::unique_ptr<DeviceAllocator> memory_;
  std::unique_ptr<Ops> ops_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
};

}  // namespace troupe::conformance
