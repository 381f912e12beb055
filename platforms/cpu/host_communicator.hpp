// What the CPU communicators between processes share, whatever carries their
// bytes (ShmCommunicator: shared memory on one host; TcpCommunicator: sockets
// between hosts):
//   - every argument check, with the same messages on both transports;
//   - the sticky failure: after a failed collective or point-to-point call the
//     ranks are out of step, so every later call answers that first error;
//   - new_group's checks of the rank list (a group of one rank is a local
//     CpuCommunicator);
//   - the f32 sum in rank order 0..W-1 (ordered_sum), so every rank and both
//     transports get the same bits;
//   - the message of a wait that ran out of time.
// A transport implements only the run_* hooks (and make_group); they are
// called with checked arguments and a non-empty payload, and whatever they
// return that is not ok becomes the communicator's sticky failure.
//
// One thread at a time uses a communicator and the groups made from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "troupe/communicator.hpp"

namespace troupe::cpu {

/// The wait bound from TROUPE_CPU_COMM_TIMEOUT_S (seconds, > 0), else 600 s; an
/// unparsable value is an invalid_argument naming the variable.
Result<std::chrono::milliseconds> comm_timeout_from_env();

/// Seconds as "%g" ("2", "0.5"), for messages.
std::string seconds_text(std::chrono::milliseconds d);

/// The operations as the transports tag them (op << 56 of a tag), so that ranks calling
/// different ones fail instead of mixing data. kSend: a point-to-point message.
enum CommOp : uint64_t { kAllReduce = 1, kAllGather, kReduceScatter, kGather, kBroadcast, kSend };
/// "all_reduce", "all_gather", ..., "send"; another value: "an unknown operation".
const char* op_name(uint64_t op);

/// out[i] = s[0][i] + s[1][i] + ... + s[W-1][i] for i < n, added in that order. `out` may
/// be s[0]; no other source may overlap it.
void ordered_sum(float* out, std::span<const float* const> s, int64_t n);

class HostCommunicator : public DeviceCommunicator {
 public:
  HostCommunicator(const HostCommunicator&) = delete;
  HostCommunicator& operator=(const HostCommunicator&) = delete;

  int rank() const final { return rank_; }
  int world_size() const final { return world_; }
  /// f32 only (sum in rank order); other dtypes: not_supported.
  Status all_reduce(void* buf, int64_t count, DType dtype) final;
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) final;
  /// f32 only.
  Status reduce_scatter(const void* in, void* out, int64_t count, DType dtype) final;
  Status gather(const void* in, void* out, int64_t count, DType dtype, int root) final;
  Status broadcast(void* buf, int64_t count, DType dtype, int root) final;
  Status send(const void* buf, int64_t count, DType dtype, int peer) final;
  Status recv(void* buf, int64_t count, DType dtype, int peer) final;
  /// Distinct ranks of this world, this rank among them; one rank: a local communicator;
  /// more: the transport's make_group.
  Result<std::unique_ptr<DeviceCommunicator>> new_group(const std::vector<int>& ranks) final;

 protected:
  /// `name` (the id or the segment) is for messages; one call carries at most `max_call_bytes`
  /// per rank (more is an invalid_argument).
  HostCommunicator(std::string name, int rank, int world, int64_t max_call_bytes);

  enum class Wait { collective, send, recv };
  /// unavailable: rank `peer` did not do its part of `what` (a collective, receiving what
  /// this rank sends, sending what it receives) within `timeout`.
  Status timed_out(Wait what, int peer, std::chrono::milliseconds timeout) const;

  const std::string& name() const { return name_; }

  // The transport. `count` > 0 f32 elements, `bytes` > 0 per rank; a root is a rank of this
  // world (run_gather: or < 0), a peer another one. Buffers may overlap as DeviceCommunicator
  // allows.
  virtual Status run_all_reduce(float* buf, int64_t count) = 0;
  virtual Status run_reduce_scatter(const float* in, float* out, int64_t count) = 0;
  /// gather at `root`, or all_gather (every rank gets every part) when root < 0; `out`
  /// (where it is written) holds world * bytes.
  virtual Status run_gather(const uint8_t* in, uint8_t* out, int64_t bytes, int root) = 0;
  virtual Status run_broadcast(uint8_t* buf, int64_t bytes, int root) = 0;
  virtual Status run_send(const uint8_t* buf, int64_t bytes, int peer) = 0;
  virtual Status run_recv(uint8_t* buf, int64_t bytes, int peer) = 0;
  /// The `k`-th group made from this communicator: `ranks` (two or more, checked), where
  /// this rank is ranks[index]. A failure here is not sticky.
  virtual Result<std::unique_ptr<DeviceCommunicator>> make_group(const std::vector<int>& ranks, int index,
                                                                 int k) = 0;

  const int rank_;
  const int world_;

 private:
  Status usable() const;
  /// Records the first failure; returns `s`.
  Status fail(Status s);
  /// The bytes of `count` elements of `dtype` for `op`, or why they are no valid payload.
  Result<int64_t> bytes_of(const char* op, int64_t count, DType dtype) const;
  Status check_root(const char* op, int root) const;
  Status f32_only(const char* op, DType dtype) const;

  const std::string name_;
  const int64_t max_call_bytes_;
  int groups_made_ = 0;
  Status broken_;  // the first failure: every later call answers it
};

}  // namespace troupe::cpu
