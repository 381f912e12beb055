// The cuda platform's communicator for a world of one rank (no NCCL needed):
// every collective is a device copy on the device's stream, or nothing.
#pragma once

#include <memory>
#include <vector>

#include "platforms/cuda/cuda_context.hpp"
#include "troupe/communicator.hpp"

namespace troupe::cuda {

/// A world of one rank on a CUDA device: collectives are device copies or nothing.
class CudaLocalCommunicator final : public DeviceCommunicator {
 public:
  explicit CudaLocalCommunicator(std::shared_ptr<CudaContext> ctx) : ctx_(std::move(ctx)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status all_reduce(void* buf, int64_t count, DType dtype) override;
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  Status reduce_scatter(const void* in, void* out, int64_t count, DType dtype) override;
  Status gather(const void* in, void* out, int64_t count, DType dtype, int root) override;
  Status broadcast(void* buf, int64_t count, DType dtype, int root) override;
  Status send(const void* buf, int64_t count, DType dtype, int peer) override;
  Status recv(void* buf, int64_t count, DType dtype, int peer) override;
  Result<std::unique_ptr<DeviceCommunicator>> new_group(const std::vector<int>& ranks) override;

 private:
  Status copy(void* dst, const void* src, int64_t count, DType dtype);
  std::shared_ptr<CudaContext> ctx_;
};

}  // namespace troupe::cuda
