// The cuda platform's DeviceCommunicator between ranks: NCCL over device memory,
// enqueued on the rank's device stream (CudaContext), so a collective is ordered
// after the kernels that produced its input and before those that read its output.
//
// Rendezvous: make_nccl_id() (in the process of rank 0's node: ncclGetUniqueId
// starts NCCL's bootstrap root there) gives "nccl:<256 hex digits>", the
// ncclUniqueId's bytes; the head sends that string to every rank in
// config.parallel.communicator_id (a CAF message like the CPU's ids).
//
// Bounded waits: communicators are non-blocking (ncclConfig_t.blocking = 0).
// Every call waits, polling, until its work has finished on the stream, NCCL
// reports an error, or TROUPE_NCCL_TIMEOUT_S (default 600 s) passes; then the
// communicator is aborted (ncclCommAbort) and this and every later call answer
// unavailable. So a dead or hung peer costs a step its error, never a hang. The
// price is one host wait per collective (the CPU communicators wait likewise).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "platforms/cuda/cuda_context.hpp"
#include "troupe/communicator.hpp"

namespace troupe::cuda {

/// The id prefix of NCCL communicators.
inline constexpr const char* kNcclIdPrefix = "nccl:";

/// A fresh ncclUniqueId as "nccl:<hex>".
Result<std::string> make_nccl_id();

/// TROUPE_NCCL_TIMEOUT_S (seconds, > 0), else 600 s; an unparsable value is invalid_argument.
Result<std::chrono::milliseconds> nccl_timeout_from_env();

class NcclCommunicator final : public DeviceCommunicator {
 public:
  /// Joins the world of `world` ranks at `id` as `rank` (ncclCommInitRankConfig), on the
  /// device of `ctx`; every rank calls it, each in its own process, within `timeout`.
  static Result<std::unique_ptr<NcclCommunicator>> create(const std::string& id, int world, int rank,
                                                          std::shared_ptr<CudaContext> ctx,
                                                          std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  /// f32, f16 and bf16 (sum).
  Status all_reduce(void* buf, int64_t count, DType dtype) override;
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  /// f32, f16 and bf16 (sum).
  Status reduce_scatter(const void* in, void* out, int64_t count, DType dtype) override;
  /// Point-to-point sends to the root inside one NCCL group (NCCL has no gather).
  Status gather(const void* in, void* out, int64_t count, DType dtype, int root) override;
  Status broadcast(void* buf, int64_t count, DType dtype, int root) override;
  Status send(const void* buf, int64_t count, DType dtype, int peer) override;
  Status recv(void* buf, int64_t count, DType dtype, int peer) override;
  /// ncclCommSplit: a collective over this whole communicator. Every rank of it calls
  /// new_group at the same time, each with the list of its own group; the groups must not
  /// overlap (the smallest rank of a list names its group). A rank outside every group
  /// cannot take part: its call would never come, and the others time out.
  Result<std::unique_ptr<DeviceCommunicator>> new_group(const std::vector<int>& ranks) override;

 private:
  NcclCommunicator(void* comm, int world, int rank, std::shared_ptr<CudaContext> ctx,
                   std::chrono::milliseconds timeout)
      : comm_(comm), world_(world), rank_(rank), ctx_(std::move(ctx)), timeout_(timeout) {}
  Status usable() const;
  /// After an NCCL call returned `r`: waits for the communicator and the stream (bounded).
  Status finish(int r, const char* what);
  Status fail(Status s);

  void* comm_;  // ncclComm_t
  int world_;
  int rank_;
  std::shared_ptr<CudaContext> ctx_;
  std::chrono::milliseconds timeout_;
  Status broken_;
};

}  // namespace troupe::cuda
