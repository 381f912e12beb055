// Helpers of the kernels/cuda tests: a fixture that skips with the device
// probe's reason when no GPU is usable, device buffers, and ASSERT_OK.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "kernels/cuda/common.hpp"

#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const ::troupe::Status troupe_test_status_ = (expr);  \
    ASSERT_TRUE(troupe_test_status_.ok()) << troupe_test_status_.to_string(); \
  } while (0)

namespace troupe::kernels::cuda::testing {

/// Skips the test (with the probe's reason, e.g. "cudaGetDeviceCount: CUDA
/// driver version is insufficient for CUDA runtime version (35)") when there
/// is no usable device; otherwise creates a stream the test runs on. The
/// message starts with the tag scripts/gpu-check.sh counts (scripts/lib/
/// gpu-check-lib.sh): on a GPU machine, any such skip fails the check.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status probe = probe_device();
    if (!probe.ok()) GTEST_SKIP() << "no usable CUDA device: " << probe.message();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  /// Waits for the stream and fails the test on an asynchronous error.
  void sync() {
    const cudaError_t err = cudaStreamSynchronize(stream_);
    ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  }
  cudaStream_t stream_ = nullptr;
};

/// count elements of T on the device (at least one byte is allocated, so a
/// pointer always exists); freed on destruction.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    void* p = nullptr;
    if (cudaMalloc(&p, (count > 0 ? count : 1) * sizeof(T)) == cudaSuccess) ptr_ = static_cast<T*>(p);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (ptr_ != nullptr && !host.empty() &&
        cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
      (void)cudaFree(ptr_);
      ptr_ = nullptr;
    }
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  bool ok() const { return ptr_ != nullptr; }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  /// The contents (empty on a copy failure, which the caller's size check catches).
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    if (ptr_ == nullptr || (count_ > 0 &&
                            cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess))
      return {};
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace troupe::kernels::cuda::testing
