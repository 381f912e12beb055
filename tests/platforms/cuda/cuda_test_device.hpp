// Helpers of the cuda platform tests: the device probe's reason to skip with,
// and host <-> device copies through the platform's own allocator.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/common.hpp"
#include "platforms/cuda/cuda_allocator.hpp"
#include "platforms/cuda/cuda_context.hpp"
#include "troupe/device_memory.hpp"

namespace troupe::cuda::testing {

/// Empty when a CUDA device is usable; otherwise the probe's reason ("cudaGetDeviceCount: ...").
inline std::string no_gpu_reason() {
  const Status probe = kernels::cuda::probe_device();
  return probe.ok() ? std::string() : probe.message();
}

#define TROUPE_SKIP_WITHOUT_GPU()                                         \
  do {                                                                    \
    const std::string troupe_no_gpu_ = ::troupe::cuda::testing::no_gpu_reason(); \
    if (!troupe_no_gpu_.empty()) GTEST_SKIP() << troupe_no_gpu_;          \
  } while (0)

/// `host` in a fresh DeviceArray of `mem` (empty on a failure, which the caller's checks catch).
template <class T>
DeviceArray<T> upload(DeviceAllocator& mem, const std::vector<T>& host) {
  DeviceArray<T> a;
  if (!a.allocate(mem, static_cast<int64_t>(host.size())).ok()) return {};
  if (!mem.copy(a.data(), host.data(), static_cast<int64_t>(host.size() * sizeof(T)), CopyKind::host_to_device).ok())
    return {};
  return a;
}

template <class T>
std::vector<T> download(DeviceAllocator& mem, const DeviceArray<T>& a) {
  std::vector<T> host(static_cast<size_t>(a.size()));
  if (a.empty() ||
      !mem.copy(host.data(), a.data(), static_cast<int64_t>(host.size() * sizeof(T)), CopyKind::device_to_host).ok())
    return {};
  return host;
}

}  // namespace troupe::cuda::testing
