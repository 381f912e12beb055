// The sim accelerator's DeviceCommunicator: a world of one rank. Its
// collectives are copies within the device's memory (a world of one sums and
// gathers nothing). The sim offers no multi-rank communicator: a world of more
// ranks is refused by the platform with a clear error.
#pragma once

#include "sim_device.hpp"
#include "troupe/communicator.hpp"

namespace sim {

class SimCommunicator final : public troupe::DeviceCommunicator {
 public:
  explicit SimCommunicator(SimDevice& device) : d_(device) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  troupe::Status all_reduce(void* buf, int64_t count, troupe::DType dtype) override;
  troupe::Status all_gather(const void* in, void* out, int64_t count, troupe::DType dtype) override;
  troupe::Status reduce_scatter(const void* in, void* out, int64_t count, troupe::DType dtype) override;
  troupe::Status gather(const void* in, void* out, int64_t count, troupe::DType dtype, int root) override;
  troupe::Status broadcast(void* buf, int64_t count, troupe::DType dtype, int root) override;
  troupe::Status send(const void* buf, int64_t count, troupe::DType dtype, int peer) override;
  troupe::Status recv(void* buf, int64_t count, troupe::DType dtype, int peer) override;

 private:
  /// Checks `buf` is `count` elements of device memory; copies in -> out when both are given.
  troupe::Status device_copy(const char* op, const void* in, void* out, int64_t count, troupe::DType dtype);
  SimDevice& d_;
};

}  // namespace sim
