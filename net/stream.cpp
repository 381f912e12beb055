#include "net/stream.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "net/tls_socket.hpp"

namespace troupe::net {

Result<Stream> Stream::tls(Socket socket, const TlsContext& ctx, bool server, const std::string& dialed_host) {
  Stream s(std::move(socket));
  ERR_clear_error();
  s.ssl_ = SSL_new(ctx.native());
  if (s.ssl_ == nullptr || !crypto::tls_attach_socket(s.ssl_, s.fd()))
    return unavailable("TLS: cannot start a session: " + openssl_error());
  if (server) {
    SSL_set_accept_state(s.ssl_);
    return s;
  }
  SSL_set_connect_state(s.ssl_);
  if (dialed_host.empty()) return s;
  // The listener's certificate must name the address we dialed.
  X509_VERIFY_PARAM* param = SSL_get0_param(s.ssl_);
  unsigned char addr[16];
  const bool ip = inet_pton(AF_INET, dialed_host.c_str(), addr) == 1 ||
                  inet_pton(AF_INET6, dialed_host.c_str(), addr) == 1;
  const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, dialed_host.c_str())
                    : X509_VERIFY_PARAM_set1_host(param, dialed_host.c_str(), 0);
  if (ok != 1) return invalid_argument("TLS: cannot check certificates for the host '" + dialed_host + "'");
  if (!ip) SSL_set_tlsext_host_name(s.ssl_, dialed_host.c_str());
  return s;
}

Stream::Stream(Stream&& o) noexcept { *this = std::move(o); }

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    close();
    socket_ = std::move(o.socket_);
    ssl_ = std::exchange(o.ssl_, nullptr);
    handshake_done_ = o.handshake_done_;
    handshake_wants_ = o.handshake_wants_;
    read_wants_write_ = o.read_wants_write_;
    write_wants_read_ = o.write_wants_read_;
    error_ = std::move(o.error_);
  }
  return *this;
}

void Stream::close() {
  if (ssl_ != nullptr) {
    if (handshake_done_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // one close_notify, not waited for
    }
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  socket_.reset();
  handshake_done_ = false;
  read_wants_write_ = write_wants_read_ = false;
}

Stream::Io Stream::result(int rc, const char* what, bool reading) {
  const int saved_errno = errno;
  const int e = SSL_get_error(ssl_, rc);
  switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      ERR_clear_error();
      if (reading) read_wants_write_ = e == SSL_ERROR_WANT_WRITE;
      else write_wants_read_ = e == SSL_ERROR_WANT_READ;
      handshake_wants_ = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      return Io::again;
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      error_ = "the peer closed the TLS connection";
      return Io::closed;
    case SSL_ERROR_SYSCALL: {
      std::string text = openssl_error();
      if (text.empty()) text = saved_errno != 0 ? std::strerror(saved_errno) : "the connection closed";
      error_ = *what != '\0' ? std::string(what) + ": " + text : text;
      return saved_errno == 0 ? Io::closed : Io::failed;
    }
    default: {
      std::string text = openssl_error();
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) text += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
      if (text.empty()) text = "TLS error " + std::to_string(e);
      error_ = *what != '\0' ? std::string(what) + ": " + text : text;
      return Io::failed;
    }
  }
}

Stream::Io Stream::handshake() {
  if (ssl_ == nullptr || handshake_done_) return Io::done;
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    handshake_done_ = true;
    handshake_wants_ = 0;
    return Io::done;
  }
  const Io r = result(rc, "", true);
  read_wants_write_ = false;
  return r;
}

Stream::Io Stream::read(void* data, size_t n, size_t* got) {
  *got = 0;
  if (ssl_ == nullptr) {
    const ssize_t r = ::recv(fd(), data, n, 0);
    if (r > 0) {
      *got = static_cast<size_t>(r);
      return Io::done;
    }
    if (r == 0) {
      error_ = "the peer closed the connection";
      return Io::closed;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::again;
    error_ = std::strerror(errno);
    return Io::failed;
  }
  ERR_clear_error();
  read_wants_write_ = false;
  const int r = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (r > 0) {
    *got = static_cast<size_t>(r);
    return Io::done;
  }
  return result(r, "TLS", true);
}

Stream::Io Stream::write(const void* data, size_t n, size_t* put) {
  *put = 0;
  if (n == 0) return Io::done;
  if (ssl_ == nullptr) {
    const ssize_t w = ::send(fd(), data, n, MSG_NOSIGNAL);
    if (w > 0) {
      *put = static_cast<size_t>(w);
      return Io::done;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Io::again;
    error_ = w == 0 ? "the connection closed" : std::strerror(errno);
    return Io::failed;
  }
  ERR_clear_error();
  write_wants_read_ = false;
  const int w = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (w > 0) {
    *put = static_cast<size_t>(w);
    return Io::done;
  }
  return result(w, "TLS", false);
}

short Stream::events(bool want_read, bool want_write) const {
  if (ssl_ != nullptr && !handshake_done_) return handshake_wants_ != 0 ? handshake_wants_ : short(POLLIN);
  short ev = 0;
  if (want_read) ev |= read_wants_write_ ? POLLOUT : POLLIN;
  if (want_write) ev |= write_wants_read_ ? POLLIN : POLLOUT;
  return ev;
}

bool Stream::pending() const { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

}  // namespace troupe::net
