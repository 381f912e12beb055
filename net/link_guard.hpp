// The link guard: what stands between the network and CAF's middleman on every
// link between troupe processes (a head and its nodes, a stats subscriber and
// the stats port).
//
// CAF's BASP broker trusts the framing of whoever connects: it sizes a buffer
// for the payload a header announces before the gate has seen the peer, so a
// few dozen bytes could make a node allocate gigabytes (basp_frames.hpp). So
// CAF publishes only on 127.0.0.1 (an ephemeral port), and the guard listens
// on the real address. A connection must first pass a handshake of fixed-size
// messages, bounded by a deadline: the handshake of handshake.hpp, with the
// magic "troupeLK" and proofs bound to "troupe link v1", so both sides prove
// the cluster secret with fresh nonces, and a peer without it never reaches
// CAF. Then the guard relays bytes both ways, checking every
// BASP header the remote side sends: an unknown operation or a payload above
// the frame cap drops the connection with a log line. A connection that does
// not finish the handshake within the deadline is dropped too.
//
// Handshake slots serve the guard's own first: every source address (an IPv6
// one by its /64) has `handshakes_per_source` slots of its own, and beyond them
// its connections share `max_handshakes` slots with everyone else's, so a
// flood of half-open connections from one address (or a few) fills its own
// slots and the shared ones, and a head with the secret from another address
// still gets through at once. Refusals are counted by cause (refusals()) and
// logged at most once a second per cause (refusal_log.hpp).
//
// CAF listens on no port at all: the guard hands each authenticated link to
// the process as one end of a Unix socket pair (`AdoptLink`; actors/ gives it to
// CAF's middleman as a connection), and relays the remote side to the other
// end. The connecting side (dial_link) runs the same handshake and returns the
// inner end of such a pair, relayed by a process-wide thread with the same
// frame check. So no local process can reach CAF without passing the guard.
//
// With TLS (LinkAuth::tls, tls.hpp) every connection first passes a
// mutual TLS 1.3 handshake (both certificates must chain to the cluster CA),
// and everything above (the secret handshake, then BASP) runs inside TLS.
//
// With an empty secret the proofs are HMACs under the empty key: the
// handshake and the frame cap still hold, but the secret authenticates
// nothing (TLS then does, or the link is loopback only; the CLI enforces that).
//
// None of this speaks CAF: actors/gate_actor.hpp publishes CAF's middleman
// behind a guard and connects CAF to the port dial_link returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "net/socket.hpp"
#include "net/tls.hpp"
#include "troupe/status.hpp"

namespace troupe::net {

/// What a link proves: the cluster secret (empty: none) and, when set, mutual TLS.
struct LinkAuth {
  LinkAuth() = default;
  /// A secret alone (no TLS).
  LinkAuth(std::string s) : secret(std::move(s)) {}  // NOLINT: implicit, a secret is the common case
  LinkAuth(const char* s) : secret(s) {}             // NOLINT: as above, for literals
  LinkAuth(std::string s, std::shared_ptr<const TlsContext> t) : secret(std::move(s)), tls(std::move(t)) {}
  std::string secret;
  std::shared_ptr<const TlsContext> tls;
  /// Whether a peer must prove anything (a secret or a certificate of the cluster CA).
  bool authenticates() const { return !secret.empty() || tls != nullptr; }
};

struct LinkLimits {
  /// The largest BASP payload a peer may send (TROUPE_LINK_MAX_FRAME_MB, default 64 MiB).
  uint32_t max_frame_bytes = uint32_t{64} << 20;
  /// How long a connection may take to pass the handshake (TROUPE_LINK_HANDSHAKE_TIMEOUT_S, default 10 s).
  std::chrono::milliseconds handshake_timeout{10'000};
  /// Handshake slots each source address has to itself (an IPv6 address counts by its /64).
  size_t handshakes_per_source = 4;
  /// Slots shared by the connections beyond their source's own; more are closed at once.
  size_t max_handshakes = 64;
  /// Own slots in use over every source at most (a bound on descriptors).
  size_t max_own_handshakes = 1024;
};

/// The defaults, with TROUPE_LINK_MAX_FRAME_MB and TROUPE_LINK_HANDSHAKE_TIMEOUT_S applied;
/// invalid_argument naming the variable when one is malformed.
Result<LinkLimits> link_limits_from_env();

/// Takes the inner end of an authenticated link (a connected Unix socket; the guard relays
/// the remote side to the other end). An error is logged by the guard and the link closed.
using AdoptLink = std::function<Status(Socket inner)>;

class LinkGuard {
 public:
  /// Listens on host:port (port 0: any free port) for `what` ("node", "stat logger": for
  /// log lines) and hands every connection that passes `auth` (TLS, then the secret
  /// handshake) to `adopt`, relaying it.
  static Result<std::unique_ptr<LinkGuard>> listen(const std::string& host, uint16_t port, AdoptLink adopt,
                                                   LinkAuth auth, std::string what, LinkLimits limits);
  ~LinkGuard();  // closes the listener and every connection it relays
  LinkGuard(const LinkGuard&) = delete;
  LinkGuard& operator=(const LinkGuard&) = delete;

  uint16_t port() const { return port_; }
  /// Connections refused so far, by cause: "handshake_slots" (no slot free),
  /// "handshake_timeout", "handshake_refused" (not the protocol, a wrong proof, TLS),
  /// "frame" (a bad BASP frame after the handshake).
  std::map<std::string, uint64_t> refusals() const;

  struct Relay;

 private:
  LinkGuard() = default;
  uint16_t port_ = 0;
  std::unique_ptr<Relay> relay_;
};

/// Connects to the guard of `what` at host:port and passes its handshake with `auth`
/// (with TLS: the guard's certificate must chain to the cluster CA and name `host`);
/// returns the inner end of a Unix socket pair whose other end is relayed to it (for CAF
/// to adopt as its connection).
/// Errors: unavailable (unreachable, silent, not a troupe link), invalid_argument (the
/// other side refused our proof or certificate, or could not prove its own).
Result<Socket> dial_link(const std::string& host, uint16_t port, const LinkAuth& auth, const std::string& what,
                         std::chrono::milliseconds timeout);

}  // namespace troupe::net
