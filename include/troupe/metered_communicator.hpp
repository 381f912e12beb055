// A DeviceCommunicator that counts what goes through another one: the payload
// bytes handed to collectives and point-to-point calls, and the time spent in
// them. A worker wraps its platform's communicators in it so each step can
// report its communication (ModelRunnerOutput), whatever the platform.
#pragma once

#include <atomic>
#include <memory>

#include "troupe/communicator.hpp"

namespace troupe {

/// Totals shared by a communicator and the groups made from it.
struct CommunicatorMeter {
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> nanoseconds{0};
  void reset() {
    bytes = 0;
    nanoseconds = 0;
  }
};

class MeteredCommunicator final : public DeviceCommunicator {
 public:
  MeteredCommunicator(std::unique_ptr<DeviceCommunicator> inner, std::shared_ptr<CommunicatorMeter> meter);
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  Status all_reduce(void* buf, int64_t count, DType dtype) override;
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  Status reduce_scatter(const void* in, void* out, int64_t count, DType dtype) override;
  Status gather(const void* in, void* out, int64_t count, DType dtype, int root) override;
  Status broadcast(void* buf, int64_t count, DType dtype, int root) override;
  Status send(const void* buf, int64_t count, DType dtype, int peer) override;
  Status recv(void* buf, int64_t count, DType dtype, int peer) override;
  /// The inner communicator's group, metered into the same totals.
  Result<std::unique_ptr<DeviceCommunicator>> new_group(const std::vector<int>& ranks) override;

  const std::shared_ptr<CommunicatorMeter>& meter() const { return meter_; }

 private:
  template <class F>
  Status timed(int64_t count, DType dtype, F&& call);

  std::unique_ptr<DeviceCommunicator> inner_;
  std::shared_ptr<CommunicatorMeter> meter_;
};

}  // namespace troupe
