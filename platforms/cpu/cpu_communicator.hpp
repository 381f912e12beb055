// The CPU device communicator for a world of one rank: every collective is a
// copy or a no-op. Several ranks (processes of one host) use ShmCommunicator.
#pragma once

#include "troupe/communicator.hpp"

namespace troupe::cpu {

class CpuCommunicator final : public DeviceCommunicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status all_reduce(void* buf, int64_t count, DType dtype) override;
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  Status reduce_scatter(const void* in, void* out, int64_t count, DType dtype) override;
  Status gather(const void* in, void* out, int64_t count, DType dtype, int root) override;
  Status broadcast(void* buf, int64_t count, DType dtype, int root) override;
  Status send(const void* buf, int64_t count, DType dtype, int peer) override;
  Status recv(void* buf, int64_t count, DType dtype, int peer) override;
  /// {0}: another communicator of one rank.
  Result<std::unique_ptr<DeviceCommunicator>> new_group(const std::vector<int>& ranks) override;
};

}  // namespace troupe::cpu
