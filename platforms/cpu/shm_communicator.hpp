// The CPU communicator between the processes of one host: one POSIX shared
// memory segment per communicator, named from the communicator id.
//
// Why shared memory: ranks of a CPU model run one per process (each process
// has its own compute pool) and, for now, on one host. There the fastest
// correct transport is memory both processes map: a collective is one copy
// into the rank's own slot and one read of every peer's slot, with no kernel
// in the data path (a pipe or a socket copies twice through the kernel and
// wakes the peer on every buffer). Synchronisation is a few counters in the
// same segment; a waiter spins briefly, then sleeps on a futex (so 4 ranks on
// 2 cores do not steal each other's cycles) with a bounded deadline.
//
// Layout: a header, one RankState per rank (round counters, pid), one
// Mailbox per ordered pair (point-to-point), then one data slot of
// kSlotBytes per rank (collectives) and one of kMailboxBytes per ordered
// pair. Bigger messages go through in rounds of a slot each.
//
// A collective round n (every rank runs the same rounds in the same order):
//   1. wait until every rank has finished reading round n-1 (done >= n-1),
//      so the slots may be overwritten;
//   2. write this rank's data into its slot, publish arrived = n;
//   3. wait until every rank has arrived at n, check they run the same op;
//   4. read the slots (sums in rank order 0..W-1: the same bits on every
//      rank), publish done = n.
// Point-to-point: the sender waits until its mailbox to the peer is empty
// (taken == sent), writes one chunk, bumps sent; the receiver waits for
// sent > taken, reads, bumps taken.
//
// Every wait is bounded (TROUPE_CPU_COMM_TIMEOUT_S, default 600 s) and checks
// whether the peer's process still exists (when both see the same pid
// namespace), so a dead rank is reported within a fraction of a second and a
// hung one at the deadline, as unavailable. A
// failed collective leaves the ranks out of step: the communicator then
// answers every later call with the same error. That, the argument checks,
// new_group's checks and the sums in rank order are HostCommunicator's
// (host_communicator.hpp), shared with the TCP communicator; this class is
// the transport.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platforms/cpu/host_communicator.hpp"

namespace troupe::cpu {

/// Options of one shared-memory communicator.
struct ShmOptions {
  std::string name;            // POSIX shm name, "/troupe-..." (one leading slash, no other)
  int world_size = 0;
  int rank = 0;
  std::chrono::milliseconds timeout{600'000};  // every wait (and the rendezvous) is bounded by this
};

class ShmCommunicator final : public HostCommunicator {
 public:
  /// Rank 0 creates the segment (O_CREAT | O_EXCL: an existing name is an error); the
  /// others open it, retrying until the timeout. Rank 0 never waits for the others here:
  /// the first collective does. Rank 0 unlinks the name once every rank has attached (or
  /// when it is destroyed), so a crash later leaves nothing behind in /dev/shm; a rank that
  /// comes after rank 0 has ended finds no segment and gives up at its timeout.
  static Result<std::unique_ptr<ShmCommunicator>> create(const ShmOptions& options);
  ~ShmCommunicator() override;

  /// Bytes one collective round carries per rank (larger calls run in several rounds).
  static constexpr int64_t kSlotBytes = int64_t{2} << 20;
  /// Bytes one point-to-point chunk carries.
  static constexpr int64_t kMailboxBytes = int64_t{1} << 20;

 private:
  ShmCommunicator(ShmOptions options, void* base, size_t size, bool creator);

  Status run_all_reduce(float* buf, int64_t count) override;
  Status run_reduce_scatter(const float* in, float* out, int64_t count) override;
  Status run_gather(const uint8_t* in, uint8_t* out, int64_t bytes, int root) override;
  Status run_broadcast(uint8_t* buf, int64_t bytes, int root) override;
  Status run_send(const uint8_t* buf, int64_t bytes, int peer) override;
  Status run_recv(uint8_t* buf, int64_t bytes, int peer) override;
  /// A segment of its own named after this one's.
  Result<std::unique_ptr<DeviceCommunicator>> make_group(const std::vector<int>& ranks, int index, int k) override;

  void maybe_unlink();
  template <class Write, class Read>
  Status round(uint64_t tag, Write&& write, Read&& read);
  /// Until the counter at `word` reaches `target` (wrap-safe), the deadline, or `peer`'s end.
  Status wait_until(Wait what, int peer, const void* word, uint32_t target);
  bool peer_gone(int peer, int* pid) const;
  uint8_t* slot(int r) const;
  uint8_t* mailbox_data(int src, int dst) const;

  ShmOptions options_;
  void* base_;
  size_t size_;
  bool creator_;
  bool unlinked_ = false;
  uint32_t round_ = 0;                 // collective rounds completed
  std::vector<uint32_t> sent_, taken_; // point-to-point chunks, per peer
};

}  // namespace troupe::cpu
