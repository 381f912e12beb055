// A connected socket as the transport of an OpenSSL TLS session, without
// SIGPIPE. OpenSSL's own socket BIO (SSL_set_fd) writes with write(2): when
// the peer has reset the connection, the kernel raises SIGPIPE, whose default
// action ends the process, so a node that drops a link could kill an
// application that embeds the engine. Here writes use send(2) with
// MSG_NOSIGNAL and fail with EPIPE instead, whatever the process does with
// SIGPIPE. Plain C++ interface: callers pass OpenSSL's SSL* as is.
#pragma once

struct ssl_st;

namespace troupe::crypto {

/// Makes the connected stream socket `fd` the transport of `ssl` (SSL_set_fd's
/// job; `fd` stays the caller's to close). Returns false, with the reason on
/// OpenSSL's error queue, when the transport cannot be made.
bool tls_attach_socket(ssl_st* ssl, int fd);

}  // namespace troupe::crypto
