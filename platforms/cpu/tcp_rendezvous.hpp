// How the ranks of a TcpCommunicator (tcp_communicator.hpp) find each other:
// the "cpu-tcp:<host>:<port>:<token>" ids, and the hellos that connect a
// world's full mesh through rank 0's listener, or a group's through the
// members' own listeners.
//
// Every connection first passes the handshake on the cluster secret (TLS
// first when configured; tcp_trust.hpp, net/handshake.hpp), served by a thread
// per listener (open_endpoint), so nothing sits unread on a listener. Then a
// hello: a frame (net/frames.hpp) of little-endian fields (magic, version,
// kind, world size, rank, token, channel, listener address); the answer is ok
// (for a join: with the table of every rank's listener) or a refusal carrying
// a status code and its reason, which the refused side returns as its error.
//
// Rank 0's listener is opened by make_tcp_communicator_id and kept in a
// process-wide registry under the id's token until rank 0's communicator takes
// it (one nobody took within its lifetime is closed the next time the registry
// is used).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/socket.hpp"
#include "net/stream.hpp"
#include "troupe/status.hpp"

namespace troupe::cpu {

constexpr const char* kTcpIdPrefix = "cpu-tcp:";

/// The parts of "cpu-tcp:<host>:<port>:<token>".
struct TcpId {
  std::string host;
  uint16_t port = 0;
  std::string token;
};
Result<TcpId> parse_tcp_id(const std::string& id);

/// Opens rank 0's listener on `host` (any free port), keeps it in this process until rank
/// 0's communicator takes it (one nobody took within `unused_lifetime` is closed the next
/// time the registry is used), and returns the id. Connections must prove `secret`
/// (parallel.communicator_secret; empty: the cluster secret, tcp_trust.hpp).
Result<std::string> make_tcp_communicator_id(const std::string& host, std::chrono::milliseconds unused_lifetime,
                                             const std::string& secret = "");

namespace tcp {

using Clock = net::Clock;

struct Address {
  std::string host;
  uint16_t port = 0;
};
/// "rank 2 (10.0.0.5:40123)".
std::string rank_text(int rank, const Address& listener);

/// This rank's listener and the group hellos that came before this rank made that group;
/// shared by a communicator and the groups made from it.
struct Endpoint;

/// Serves `listener` from a thread of its own: every connection must pass the handshake on
/// the cluster secret (tcp_trust.hpp) and send its hello within min(10 s,
/// TROUPE_CPU_COMM_TIMEOUT_S), else it is closed and logged; hellos with another token
/// are refused. `token` and `id` name the world (for checks and log lines); `secret` is
/// the world's (empty: the cluster secret).
Result<std::shared_ptr<Endpoint>> open_endpoint(net::Socket listener, const std::string& token,
                                                const std::string& id, const std::string& secret);

/// A connected mesh: a link to every other rank (none to itself), every rank's listener.
struct Mesh {
  std::shared_ptr<Endpoint> endpoint;
  std::vector<Address> table;
  std::vector<net::Stream> links;
};

/// Rank `rank` of a world of `world` meeting at `where`: rank 0 takes its listener from this
/// process's registry (else an error saying rank 0 must run where the id was made); every
/// other rank joins through it and opens a listener of its own. Returns once every link is
/// up, or fails by `timeout` (refusals name their reason on both sides). Every connection
/// proves `secret` (empty: the cluster secret).
Result<Mesh> join_world(const std::string& id, const TcpId& where, int rank, int world,
                        std::chrono::milliseconds timeout, const std::string& secret = "");

/// The links of group rank `index` of a group whose members listen at `table`: connects to
/// the lower members, accepts the higher ones on `endpoint` (hellos naming `channel`).
Result<std::vector<net::Stream>> join_group(Endpoint& endpoint, const std::vector<Address>& table,
                                            const std::string& channel, int index, std::chrono::milliseconds timeout,
                                            const std::string& name);

}  // namespace tcp
}  // namespace troupe::cpu
