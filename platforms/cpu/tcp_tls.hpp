// TLS on the connections of the CPU platform's TCP communicator
// (tcp_communicator.hpp): when `troupe node` runs with --tls-cert, --tls-key
// and --tls-ca it names those files in TROUPE_TLS_CERT_FILE,
// TROUPE_TLS_KEY_FILE and TROUPE_TLS_CA_FILE (platforms see no CLI), and every
// connection between ranks is mutual TLS 1.3 (both certificates must chain to
// that CA; no other trust store), under the challenge-response of tcp_auth.hpp
// and everything after it. Without them, plain TCP as before.
//
// OpenSSL's libssl, called here directly: platforms build on the SDK only, so
// the engine's TLS (actors/link_tls) is out of reach.
#pragma once

#include <string>

#include "platforms/cpu/tcp_socket.hpp"
#include "troupe/status.hpp"

struct ssl_ctx_st;

namespace troupe::cpu::tcp {

/// This process's TLS context for rank connections, loaded once from the environment; null
/// when none of the three variables is set. Errors name the variable and the file.
Result<ssl_ctx_st*> comm_tls();

/// Puts a TLS session on the connected `fd` (accepting when `server`); the handshake is
/// then driven by tls_handshake_step or tls_handshake.
Status start_tls(Fd& fd, ssl_ctx_st* ctx, bool server);
/// One non-blocking step of the handshake: done; again (`*events`: what to poll for);
/// closed or failed (fd.error() says why: the peer's certificate, an alert, not TLS).
Fd::Io tls_handshake_step(Fd& fd, short* events);
/// start_tls and the whole handshake, blocking until `deadline`. Errors start with `who`:
/// invalid_argument (a certificate refused on either side, not TLS), unavailable (silent).
Status tls_handshake(Fd& fd, ssl_ctx_st* ctx, bool server, Clock::time_point deadline, const std::string& who);

/// OpenSSL's reason for the last failure on `ssl` (with the certificate check's verdict).
std::string tls_error_text(ssl_st* ssl, int saved_errno);

}  // namespace troupe::cpu::tcp
