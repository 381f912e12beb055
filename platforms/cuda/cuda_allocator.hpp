// Device memory of the cuda platform: cudaMalloc'd buffers, and copies
// enqueued on the device's stream (CudaContext), so they are ordered after
// every kernel the platform launched. A copy to the host waits for the stream.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "platforms/cuda/cuda_context.hpp"
#include "troupe/device_memory.hpp"

namespace troupe::cuda {

class CudaAllocator final : public DeviceAllocator {
 public:
  explicit CudaAllocator(std::shared_ptr<CudaContext> ctx);
  /// "cuda:<device>".
  std::string name() const override { return ctx_->name(); }
  bool host_addressable() const override { return false; }
  /// cudaMalloc; resource_exhausted (with the device's free and total bytes) when it is full.
  Result<std::unique_ptr<DeviceBuffer>> allocate(int64_t bytes) override;
  /// cudaMemcpyAsync on the device's stream; device_to_host then waits for the stream.
  Status copy(void* dst, const void* src, int64_t bytes, CopyKind kind) override;
  /// cudaMemcpy2DAsync on the device's stream; device_to_host then waits for the stream.
  Status copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t row_bytes, int64_t rows,
                 CopyKind kind) override;
  /// cudaMemsetAsync on the device's stream.
  Status fill_zero(void* dst, int64_t bytes) override;
  int64_t allocated_bytes() const override { return live_->load(); }

 private:
  std::shared_ptr<CudaContext> ctx_;
  std::shared_ptr<std::atomic<int64_t>> live_;  // shared with the buffers, which may outlive this
};

}  // namespace troupe::cuda
