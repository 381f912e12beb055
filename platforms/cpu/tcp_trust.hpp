// What every connection of the CPU platform's TCP communicator
// (tcp_communicator.hpp) proves, from the environment `troupe node` sets
// (platforms see no CLI): the handshake on the cluster secret and, when
// configured, mutual TLS under it, both from net/ (handshake.hpp, tls.hpp),
// the same code as the links between head and nodes.
//
// The handshake's magic is "troupeCA" and its proofs are bound to "troupe
// comm v1": a rank never sends activations to, nor takes a table of listeners
// from, a peer that does not know the secret, and a link guard's proof is no
// proof here. The secret: the first line of the file named by
// TROUPE_CLUSTER_SECRET_FILE (`troupe node --secret-file` sets it for its own
// process); without it the proofs are HMACs under the empty key (loopback-only
// nodes run without a secret), and the handshake still keeps strangers out of
// the data path.
//
// TLS: when `troupe node` runs with --tls-cert, --tls-key and --tls-ca it names
// those files in TROUPE_TLS_CERT_FILE, TROUPE_TLS_KEY_FILE and
// TROUPE_TLS_CA_FILE, and every connection between ranks is mutual TLS 1.3
// (both certificates must chain to that CA; no other trust store) with the
// handshake and everything after it inside. No host-name check: a rank's
// listener may be any address of its node. Without them, plain TCP.
#pragma once

#include <memory>
#include <string>

#include "net/handshake.hpp"
#include "net/tls.hpp"
#include "troupe/status.hpp"

namespace troupe::cpu::tcp {

/// The communicator's handshake (net/handshake.hpp).
const net::HandshakeSpec& comm_handshake();

/// The cluster secret of this process (TROUPE_CLUSTER_SECRET_FILE; empty without it).
Result<std::string> cluster_secret();
/// What a world's connections prove: `world_secret` (parallel.communicator_secret, which a
/// head reaching its nodes over TLS alone sends them over those links), else cluster_secret().
Result<std::string> secret_of_world(const std::string& world_secret);

/// This process's TLS context for rank connections, loaded once from the environment; null
/// when none of the three variables is set. Errors name the variable and the file.
Result<std::shared_ptr<const net::TlsContext>> comm_tls();

}  // namespace troupe::cpu::tcp
