#include "actors/link_tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "net/tls_socket.hpp"

namespace troupe::actors {
namespace {

/// The first error OpenSSL queued on this thread ("" when none), and the queue emptied.
std::string openssl_error() {
  std::string text;
  const unsigned long e = ERR_get_error();
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    // "error:0A000086:SSL routines::certificate verify failed" -> the reason only.
    const char* reason = ERR_reason_error_string(e);
    text = reason != nullptr ? reason : buf;
  }
  ERR_clear_error();
  return text;
}

/// Whether `path` can be opened for reading; else why not.
std::string unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::strerror(errno);
  std::fclose(f);
  return "";
}

}  // namespace

Result<std::shared_ptr<const TlsContext>> TlsContext::load(const TlsFiles& files) {
  if (!files.any()) return std::shared_ptr<const TlsContext>();
  if (files.cert.empty() || files.key.empty() || files.ca.empty())
    return invalid_argument("--tls-cert, --tls-key and --tls-ca go together (this process's certificate, its key, "
                            "and the cluster CA; `troupe certs` makes them)");
  for (const auto& [flag, path] : {std::pair{"--tls-cert", &files.cert}, std::pair{"--tls-key", &files.key},
                                   std::pair{"--tls-ca", &files.ca}})
    if (auto why = unreadable(*path); !why.empty())
      return not_found(std::string(flag) + ": cannot read " + *path + ": " + why);
  ERR_clear_error();
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->files_ = files;
  c->ctx_ = SSL_CTX_new(TLS_method());
  if (c->ctx_ == nullptr) return unavailable("TLS: cannot create a context: " + openssl_error());
  SSL_CTX* ctx = c->ctx_;
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1)
    return invalid_argument("--tls-cert: " + files.cert + " is not a PEM certificate (" + openssl_error() + ")");
  {
    std::FILE* f = std::fopen(files.key.c_str(), "rb");
    EVP_PKEY* key = f != nullptr ? PEM_read_PrivateKey(f, nullptr, nullptr, nullptr) : nullptr;
    if (f != nullptr) std::fclose(f);
    if (key == nullptr)
      return invalid_argument("--tls-key: " + files.key + " is not a PEM private key (" + openssl_error() + ")");
    const bool used = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(key);
    if (!used)
      return invalid_argument("--tls-key: " + files.key + " is not the key of the certificate " + files.cert + " (" +
                              openssl_error() + ")");
  }
  // The cluster CA is the only trust anchor: no system store.
  {
    std::FILE* f = std::fopen(files.ca.c_str(), "rb");
    X509* ca = f != nullptr ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
    if (f != nullptr) std::fclose(f);
    if (ca == nullptr)
      return invalid_argument("--tls-ca: " + files.ca + " holds no PEM certificate (" + openssl_error() + ")");
    X509_free(ca);
  }
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1)
    return invalid_argument("--tls-ca: cannot use " + files.ca + " as the cluster CA (" + openssl_error() + ")");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(ctx, 4);
  // No session tickets or resumption: every link does a full handshake with both certificates,
  // and nothing arrives after it that a relay would have to handle.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return std::shared_ptr<const TlsContext>(std::move(c));
}

TlsContext::~TlsContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

Result<LinkStream> LinkStream::tls(int fd, const TlsContext& ctx, bool server, const std::string& dialed_host) {
  LinkStream s(fd);
  ERR_clear_error();
  s.ssl_ = SSL_new(ctx.native());
  if (s.ssl_ == nullptr || !crypto::tls_attach_socket(s.ssl_, fd))
    return unavailable("TLS: cannot start a session: " + openssl_error());
  if (server) {
    SSL_set_accept_state(s.ssl_);
  } else {
    SSL_set_connect_state(s.ssl_);
    // The listener's certificate must name the address we dialed.
    X509_VERIFY_PARAM* param = SSL_get0_param(s.ssl_);
    unsigned char addr[16];
    const bool ip = inet_pton(AF_INET, dialed_host.c_str(), addr) == 1 ||
                    inet_pton(AF_INET6, dialed_host.c_str(), addr) == 1;
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, dialed_host.c_str())
                      : X509_VERIFY_PARAM_set1_host(param, dialed_host.c_str(), 0);
    if (ok != 1) return invalid_argument("TLS: cannot check certificates for the host '" + dialed_host + "'");
    if (!ip) SSL_set_tlsext_host_name(s.ssl_, dialed_host.c_str());
  }
  return s;
}

LinkStream::LinkStream(LinkStream&& o) noexcept { *this = std::move(o); }

LinkStream& LinkStream::operator=(LinkStream&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    ssl_ = std::exchange(o.ssl_, nullptr);
    handshake_done_ = o.handshake_done_;
    handshake_wants_ = o.handshake_wants_;
    read_wants_write_ = o.read_wants_write_;
    write_wants_read_ = o.write_wants_read_;
    error_ = std::move(o.error_);
  }
  return *this;
}

void LinkStream::close() {
  if (ssl_ != nullptr) {
    if (handshake_done_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // one close_notify, not waited for
    }
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

LinkStream::Io LinkStream::result(int rc, const char* what, bool reading) {
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

LinkStream::Io LinkStream::handshake() {
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

LinkStream::Io LinkStream::read(char* data, size_t n, size_t* got) {
  *got = 0;
  if (ssl_ == nullptr) {
    const ssize_t r = ::recv(fd_, data, n, 0);
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

LinkStream::Io LinkStream::write(const char* data, size_t n, size_t* put) {
  *put = 0;
  if (n == 0) return Io::done;
  if (ssl_ == nullptr) {
    const ssize_t w = ::send(fd_, data, n, MSG_NOSIGNAL);
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

short LinkStream::events(bool want_read, bool want_write) const {
  if (ssl_ != nullptr && !handshake_done_) return handshake_wants_ != 0 ? handshake_wants_ : short(POLLIN);
  short ev = 0;
  if (want_read) ev |= read_wants_write_ ? POLLOUT : POLLIN;
  if (want_write) ev |= write_wants_read_ ? POLLIN : POLLOUT;
  return ev;
}

bool LinkStream::pending() const { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

}  // namespace troupe::actors
