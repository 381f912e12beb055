// The CPU communicator between hosts: a full mesh of TCP connections (one per
// pair of ranks) over plain POSIX sockets, carrying raw bytes.
//
// Same contract and numerics as ShmCommunicator (shm_communicator.hpp): f32
// sums are added in rank order 0..W-1, so every rank gets the same bits, and
// the same bits as the shared-memory communicator. Use shared memory between
// the processes of one host (no kernel in the data path); this between hosts.
//
// Rendezvous (id "cpu-tcp:<host>:<port>:<token>", tcp_rendezvous.hpp):
//   - make_tcp_communicator_id, in the process of rank 0, opens a listener on
//     <host> (any free port) and keeps it in a process-wide registry under the
//     token (closed if nobody takes it within its lifetime);
//   - rank 0's create() takes that listener; every other rank connects to it
//     (retrying until the timeout), opens a listener of its own on the local
//     address of that connection, and sends a hello: token, rank, world size
//     and its listener's address;
//   - once every rank has joined, rank 0 answers each with the table of all
//     listeners; then each rank connects to every lower rank but 0 (that link
//     exists already) and accepts every higher one, each with a hello checked
//     for token, world and rank. A wrong token, world size or a rank taken
//     twice is refused with a clear error on both sides.
//   - new_group connects the group's members the same way through the same
//     listeners (no new rendezvous), its hellos naming the group.
// Before its hello, every connection passes the handshake on the cluster
// secret, inside mutual TLS when the node has certificates (tcp_trust.hpp;
// net/, the same code as the links between head and nodes), and the links
// are net::Streams.
//
// Data: every message is a 16-byte header (what op, root and size the sender
// runs; its payload bytes) and the payload. Every collective is one round
// (all_reduce of a large buffer on more than two ranks: two, reduce-scatter
// then all-gather) in which each rank sends one message to every other rank
// and receives one from each (empty where it carries nothing, so ranks that
// call different collectives all fail instead of mixing data, as with shared
// memory). One poll() loop writes and reads every connection at once, so two
// ranks sending large buffers to each other never deadlock. TCP_NODELAY.
//
// Every wait is bounded: TROUPE_CPU_COMM_TIMEOUT_S without progress. A peer
// whose connection ends (its process died, or it destroyed its communicator)
// is reported at once as unavailable naming its rank. Argument checks, the
// sticky failure (every call after a failure answers it), new_group's checks
// and the ordered sums are HostCommunicator's (host_communicator.hpp), shared
// with the shared-memory communicator; this class is the transport.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/stream.hpp"
#include "platforms/cpu/host_communicator.hpp"
#include "platforms/cpu/tcp_rendezvous.hpp"

namespace troupe::cpu {

struct TcpOptions {
  std::string id;                 // for messages
  TcpId where;                    // rank 0's listener and the token
  int world_size = 0;
  int rank = 0;
  std::chrono::milliseconds timeout{600'000};  // the rendezvous, and every wait without progress
  std::string secret;             // what connections prove (parallel.communicator_secret); empty: the cluster's
};

class TcpCommunicator final : public HostCommunicator {
 public:
  /// Rank 0 takes its listener from this process's registry (made by
  /// make_tcp_communicator_id here); every rank returns once the mesh is connected.
  static Result<std::unique_ptr<TcpCommunicator>> create(const TcpOptions& options);
  ~TcpCommunicator() override;

  /// all_reduce sends the whole buffer to every peer (one round) up to this size, or with
  /// two ranks; larger buffers on more ranks are reduce-scattered, then all-gathered.
  static constexpr int64_t kDirectAllReduceBytes = int64_t{64} << 10;

 private:
  TcpCommunicator(std::string name, int rank, int world, std::chrono::milliseconds timeout,
                  std::shared_ptr<tcp::Endpoint> endpoint, std::string channel, std::vector<tcp::Address> table,
                  std::vector<net::Stream> links);

  Status run_all_reduce(float* buf, int64_t count) override;
  Status run_reduce_scatter(const float* in, float* out, int64_t count) override;
  Status run_gather(const uint8_t* in, uint8_t* out, int64_t bytes, int root) override;
  Status run_broadcast(uint8_t* buf, int64_t bytes, int root) override;
  Status run_send(const uint8_t* buf, int64_t bytes, int peer) override;
  Status run_recv(uint8_t* buf, int64_t bytes, int peer) override;
  /// Connections of its own between the members, through the same listeners.
  Result<std::unique_ptr<DeviceCommunicator>> make_group(const std::vector<int>& ranks, int index, int k) override;

  struct Part;
  std::string who(int peer) const;
  /// Runs every part at once: each writes one message to its peer and/or reads one.
  Status exchange(std::vector<Part>& parts, Wait what, const char* op);
  Status progress_send(Part& p, const char* op);
  Status progress_recv(Part& p, const char* op);
  uint8_t* scratch(size_t bytes);

  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp::Endpoint> endpoint_;  // this rank's listener, shared with its groups
  std::string channel_;       // "" for the world, "/<k>:<ranks>" for a group
  std::vector<tcp::Address> table_;  // every rank's listener
  std::vector<net::Stream> links_;  // connection to each peer (none to itself)
  std::vector<uint8_t> scratch_;
};

}  // namespace troupe::cpu
