#include "net/tls_socket.hpp"

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace troupe::crypto {
namespace {

int fd_of(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

// Would-block and EINTR are OpenSSL's retries (its caller polls and calls again);
// other failures keep their errno for SSL_get_error's SSL_ERROR_SYSCALL.
int io_result(BIO* b, ssize_t n, void (*set_retry)(BIO*)) {
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) set_retry(b);
  return static_cast<int>(n);
}

void retry_write(BIO* b) { BIO_set_retry_write(b); }
void retry_read(BIO* b) { BIO_set_retry_read(b); }

int socket_write(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  return io_result(b, ::send(fd_of(b), data, static_cast<size_t>(n), MSG_NOSIGNAL), retry_write);
}

int socket_read(BIO* b, char* data, int n) {
  BIO_clear_retry_flags(b);
  return io_result(b, ::recv(fd_of(b), data, static_cast<size_t>(n), 0), retry_read);
}

int socket_puts(BIO* b, const char* text) { return socket_write(b, text, static_cast<int>(std::strlen(text))); }

long socket_ctrl(BIO* b, int cmd, long, void* ptr) {
  switch (cmd) {
    case BIO_C_GET_FD:
      if (ptr != nullptr) *static_cast<int*>(ptr) = fd_of(b);
      return fd_of(b);
    case BIO_CTRL_GET_CLOSE:
      return BIO_NOCLOSE;  // the socket is the caller's
    case BIO_CTRL_FLUSH:     // send has already handed the bytes to the kernel
    case BIO_CTRL_SET_CLOSE:
    case BIO_CTRL_DUP:
      return 1;
    default:
      return 0;  // declined (kTLS, ...): OpenSSL goes without it
  }
}

int socket_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* make_method() {
  BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                               "troupe socket without SIGPIPE");
  if (m == nullptr) return nullptr;
  const bool ok = BIO_meth_set_write(m, socket_write) == 1 && BIO_meth_set_read(m, socket_read) == 1 &&
                  BIO_meth_set_puts(m, socket_puts) == 1 && BIO_meth_set_ctrl(m, socket_ctrl) == 1 &&
                  BIO_meth_set_create(m, socket_create) == 1;
  if (ok) return m;
  BIO_meth_free(m);
  return nullptr;
}

}  // namespace

bool tls_attach_socket(ssl_st* ssl, int fd) {
  static BIO_METHOD* const method = make_method();  // once per process, never freed
  if (ssl == nullptr || fd < 0 || method == nullptr) return false;
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return false;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);  // one reference for both directions, owned by the session
  return true;
}

}  // namespace troupe::crypto
