#include "platforms/cpu/tcp_tls_bio.hpp"

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace troupe::cpu::tcp {
namespace {

int socket_of(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

// A would-block or interrupted call is retried by OpenSSL's caller (poll, then
// the same SSL_read/SSL_write); any other failure leaves errno for SSL_get_error.
int after(BIO* b, ssize_t n, bool writing) {
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    if (writing) BIO_set_retry_write(b);
    else BIO_set_retry_read(b);
  }
  return static_cast<int>(n);
}

int bio_write(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  return after(b, ::send(socket_of(b), data, static_cast<size_t>(n), MSG_NOSIGNAL), true);
}

int bio_read(BIO* b, char* data, int n) {
  BIO_clear_retry_flags(b);
  return after(b, ::recv(socket_of(b), data, static_cast<size_t>(n), 0), false);
}

int bio_puts(BIO* b, const char* s) { return bio_write(b, s, static_cast<int>(std::strlen(s))); }

long bio_ctrl(BIO* b, int cmd, long, void* ptr) {
  if (cmd == BIO_C_GET_FD) {
    if (ptr != nullptr) *static_cast<int*>(ptr) = socket_of(b);
    return socket_of(b);
  }
  if (cmd == BIO_CTRL_GET_CLOSE) return BIO_NOCLOSE;
  // Flushing has nothing to do (send has handed the bytes to the kernel);
  // anything else, such as kTLS, is declined and OpenSSL goes without it.
  return cmd == BIO_CTRL_FLUSH || cmd == BIO_CTRL_SET_CLOSE || cmd == BIO_CTRL_DUP ? 1 : 0;
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = []() -> BIO_METHOD* {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "troupe cpu communicator socket");
    if (m != nullptr && BIO_meth_set_write(m, bio_write) == 1 && BIO_meth_set_read(m, bio_read) == 1 &&
        BIO_meth_set_puts(m, bio_puts) == 1 && BIO_meth_set_ctrl(m, bio_ctrl) == 1 &&
        BIO_meth_set_create(m, bio_create) == 1)
      return m;
    if (m != nullptr) BIO_meth_free(m);
    return nullptr;
  }();
  return method;
}

}  // namespace

bool attach_socket(ssl_st* ssl, int fd) {
  BIO_METHOD* m = socket_method();
  BIO* bio = ssl != nullptr && fd >= 0 && m != nullptr ? BIO_new(m) : nullptr;
  if (bio == nullptr) return false;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);  // the session owns the BIO from here on
  return true;
}

}  // namespace troupe::cpu::tcp
