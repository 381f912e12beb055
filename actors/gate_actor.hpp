// Gates: what a process publishes on the network instead of its real actors.
// A peer asks for a challenge (a one-time nonce) and answers it with
// HMAC-SHA256(secret, nonce) (net/handshake.hpp: Challenges, nonce_proof;
// nonces from the OS's CSPRNG, compared in constant time); only then does the
// gate hand out the guarded actor (a node's plugin host, an engine's stat
// logger). The secret never crosses the wire. A refusal is logged on both
// sides. With an empty secret (loopback only; the CLI enforces that) any
// answer is accepted. CAF listens on no port (links reach it through the
// guard as Unix socket pairs), so the gate is a second check after the guard's.
// Gates are published only behind a link guard (publish_guarded), and
// connect_node/connect_stats dial through one: CAF's middleman never reads a
// byte from a peer that has not proven the secret, nor (with TLS) one without a
// certificate of the cluster CA (net/link_guard.hpp, net/tls.hpp).
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/messages.hpp"
#include "net/link_guard.hpp"
#include "troupe/status.hpp"

namespace troupe::actors {

node_gate_actor spawn_node_gate(caf::actor_system& system, plugin_host_actor guarded, std::string secret);
stats_gate_actor spawn_stats_gate(caf::actor_system& system, stat_logger_actor guarded, std::string secret);

/// Publishes `gate` behind a link guard listening on host:port (net/link_guard.hpp: TLS
/// when `auth` has it, a handshake on its secret, a frame cap, a deadline, handshake slots
/// per source; limits from link_limits_from_env). CAF itself listens on no port: each
/// authenticated link reaches its BASP broker as a Unix socket pair. The guard's port() is
/// the one to announce.
Result<std::unique_ptr<net::LinkGuard>> publish_guarded(caf::actor_system& system, const node_gate_actor& gate,
                                                        const std::string& host, uint16_t port,
                                                        const net::LinkAuth& auth);
Result<std::unique_ptr<net::LinkGuard>> publish_guarded(caf::actor_system& system, const stats_gate_actor& gate,
                                                        const std::string& host, uint16_t port,
                                                        const net::LinkAuth& auth);

/// The proof for `nonce`: lower-case hex of HMAC-SHA256(secret, nonce) (net::nonce_proof).
std::string gate_proof(const std::string& secret, const std::string& nonce);

/// Connect to the gate published at host:port (through its link guard, with `auth`) and
/// pass it. Errors: unavailable (unreachable, no answer within `timeout`), invalid_argument
/// (the gate refused our proof: wrong secret; or TLS failed: a certificate not of the
/// cluster CA on either side).
Result<plugin_host_actor> connect_node(caf::actor_system& system, const std::string& host, uint16_t port,
                                       const net::LinkAuth& auth, std::chrono::milliseconds timeout);
Result<stat_logger_actor> connect_stats(caf::actor_system& system, const std::string& host, uint16_t port,
                                        const net::LinkAuth& auth, std::chrono::milliseconds timeout);

/// "HOST:PORT" → host and port; invalid_argument naming `what` otherwise.
Status parse_host_port(const std::string& text, const std::string& what, std::string* host, uint16_t* port);
/// Whether `host` is a loopback address or name (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

}  // namespace troupe::actors
