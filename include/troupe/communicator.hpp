// DeviceCommunicator: collectives between the ranks of one model (tensor and
// pipeline parallelism). NCCL on CUDA; the CPU platform has its own (shared
// memory between the processes of one host). Every rank of a communicator
// makes the same collective calls in the same order; ranks are its own
// (0 .. world_size-1). Errors: unavailable when a peer does not arrive in time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "troupe/dtype.hpp"
#include "troupe/status.hpp"

namespace troupe {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Sum `count` elements of `buf` over all ranks, result on every rank.
  virtual Status all_reduce(void* buf, int64_t count, DType dtype) = 0;
  /// Concatenate each rank's `count` elements of `in` into `out` (world_size * count) on every rank.
  virtual Status all_gather(const void* in, void* out, int64_t count, DType dtype) = 0;
  /// Sum over ranks, then rank r keeps block r (`count` elements) of the sum in `out`.
  virtual Status reduce_scatter(const void* in, void* out, int64_t count, DType dtype) = 0;
  /// Concatenate every rank's `count` elements at rank `root` only (`out` ignored elsewhere).
  virtual Status gather(const void* in, void* out, int64_t count, DType dtype, int root) = 0;
  /// Copy `count` elements of `buf` from rank `root` to every rank.
  virtual Status broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  /// Point-to-point: send to rank `peer`.
  virtual Status send(const void* buf, int64_t count, DType dtype, int peer) = 0;
  /// Point-to-point: receive from rank `peer`.
  virtual Status recv(void* buf, int64_t count, DType dtype, int peer) = 0;
  /// A communicator over `ranks` (ranks of this communicator, in the order that gives the
  /// new ranks, containing this rank), as torch.distributed.new_group / ncclCommSplit.
  /// Every rank listed calls it with the same list, and every rank of this communicator
  /// makes its new_group calls in the same order. The default answers not_supported.
  virtual Result<std::unique_ptr<DeviceCommunicator>> new_group(const std::vector<int>& ranks);
};

}  // namespace troupe
