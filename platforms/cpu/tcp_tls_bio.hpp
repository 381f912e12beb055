// The TLS sessions' transport for the CPU communicator's TCP links: the socket,
// written with send(2) and MSG_NOSIGNAL. OpenSSL's socket BIO (SSL_set_fd)
// writes with write(2), and a write to a peer that reset the connection raises
// SIGPIPE, which ends the process unless it ignores the signal: a rank that
// lost its peer would take down the application embedding it. With
// MSG_NOSIGNAL the write fails with EPIPE and the link reports a lost peer.
// (The runtime has the same transport for the engine's node links,
// net/tls_socket; a platform plugin links the SDK only.)
#pragma once

struct ssl_st;

namespace troupe::cpu::tcp {

/// SSL_set_fd without SIGPIPE: `fd` (a connected stream socket, still the
/// caller's to close) becomes the transport of `ssl`. False, with OpenSSL's
/// error queue saying why, when the transport cannot be made.
bool attach_socket(ssl_st* ssl, int fd);

}  // namespace troupe::cpu::tcp
