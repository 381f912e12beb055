// tls_attach_socket: a TLS session's writes to a peer that has gone fail with EPIPE
// and leave the process alive, where OpenSSL's own socket transport (SSL_set_fd)
// raises SIGPIPE, whose default action ends the process. The session here is a
// client whose first write (its ClientHello) goes to a socket whose other end is
// closed; a whole handshake and data through this transport are the link tests'
// (tests/net/link_guard_tls_test.cpp) and the nodes' over TLS.
#include <gtest/gtest.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "net/tls_socket.hpp"

namespace troupe::crypto {
namespace {

// A client session on one end of a stream socket pair whose other end is closed;
// returns SSL_get_error of its handshake and the errno the write left.
struct HandshakeResult {
  int ssl_error = 0;
  int saved_errno = 0;
};

HandshakeResult handshake_to_a_closed_peer(bool ours) {
  signal(SIGPIPE, SIG_DFL);  // as an embedding application may have it
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return {-1, errno};
  ::close(sv[1]);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  const bool attached = ours ? tls_attach_socket(ssl, sv[0]) : SSL_set_fd(ssl, sv[0]) == 1;
  HandshakeResult r;
  if (!attached) {
    r.ssl_error = -2;
  } else {
    SSL_set_connect_state(ssl);
    errno = 0;
    const int rc = SSL_do_handshake(ssl);
    r.saved_errno = errno;
    r.ssl_error = SSL_get_error(ssl, rc);
  }
  ERR_clear_error();
  SSL_free(ssl);  // frees our transport too; the socket stays ours
  SSL_CTX_free(ctx);
  ::close(sv[0]);
  return r;
}

TEST(TlsSocket, AWriteToAPeerThatHasGoneIsEpipeNotSigpipe) {
  const HandshakeResult r = handshake_to_a_closed_peer(true);
  EXPECT_EQ(r.ssl_error, SSL_ERROR_SYSCALL);
  EXPECT_EQ(r.saved_errno, EPIPE);
}

// The premise: the same handshake through OpenSSL's own socket transport is ended by
// SIGPIPE (in a child process).
TEST(TlsSocket, OpenSslsOwnSocketTransportDiesOfSigpipeThere) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(handshake_to_a_closed_peer(false), ::testing::KilledBySignal(SIGPIPE), "");
}

TEST(TlsSocket, NoSessionOrNoSocketIsRefused) {
  EXPECT_FALSE(tls_attach_socket(nullptr, 0));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  EXPECT_FALSE(tls_attach_socket(ssl, -1));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

}  // namespace
}  // namespace troupe::crypto
