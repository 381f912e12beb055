#include "platforms/cpu/tcp_tls.hpp"

#include "platforms/cpu/tcp_tls_bio.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace troupe::cpu::tcp {

// Fd's TLS session is set here only.
struct TlsAccess {
  static ssl_st*& session(Fd& fd) { return fd.tls_; }
  static std::string& error(Fd& fd) { return fd.error_; }
};

namespace {

std::string first_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : "OpenSSL error " + std::to_string(e);
}

Result<ssl_ctx_st*> load_from_env() {
  const char* cert = std::getenv("TROUPE_TLS_CERT_FILE");
  const char* key = std::getenv("TROUPE_TLS_KEY_FILE");
  const char* ca = std::getenv("TROUPE_TLS_CA_FILE");
  auto set = [](const char* v) { return v != nullptr && *v != '\0'; };
  if (!set(cert) && !set(key) && !set(ca)) return static_cast<ssl_ctx_st*>(nullptr);
  if (!set(cert) || !set(key) || !set(ca))
    return invalid_argument("cpu communicator: TROUPE_TLS_CERT_FILE, TROUPE_TLS_KEY_FILE and TROUPE_TLS_CA_FILE go "
                            "together (troupe node --tls-cert, --tls-key, --tls-ca sets them)");
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) return unavailable("cpu communicator: no TLS context: " + first_error());
  auto fail = [&](const std::string& what) {
    SSL_CTX_free(ctx);
    return invalid_argument("cpu communicator: " + what + " (" + first_error() + ")");
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
    return fail(std::string("TROUPE_TLS_CERT_FILE: cannot use ") + cert + " as a PEM certificate");
  if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
    return fail(std::string("TROUPE_TLS_KEY_FILE: cannot use ") + key + " as a PEM private key");
  if (SSL_CTX_check_private_key(ctx) != 1)
    return fail(std::string("TROUPE_TLS_KEY_FILE: ") + key + " is not the key of " + cert);
  if (SSL_CTX_load_verify_locations(ctx, ca, nullptr) != 1)
    return fail(std::string("TROUPE_TLS_CA_FILE: cannot use ") + ca + " as the cluster CA");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(ctx, 4);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000));
}

}  // namespace

Result<ssl_ctx_st*> comm_tls() {
  // Loaded once (the files of a node do not change while it runs); a failure is told every time.
  static std::mutex mu;
  static bool loaded = false;
  static ssl_ctx_st* ctx = nullptr;  // never freed: used until the process ends
  std::lock_guard lock(mu);
  if (loaded) return ctx;
  auto c = load_from_env();
  if (!c.ok()) return c.status();
  ctx = *c;
  loaded = true;
  return ctx;
}

std::string tls_error_text(ssl_st* ssl, int saved_errno) {
  std::string text = first_error();
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) text += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  if (text.empty()) text = saved_errno != 0 ? std::strerror(saved_errno) : "the connection closed";
  return text;
}

Status start_tls(Fd& fd, ssl_ctx_st* ctx, bool server) {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr || !attach_socket(ssl, fd.get())) {
    if (ssl != nullptr) SSL_free(ssl);
    return unavailable("cpu communicator: cannot start TLS: " + first_error());
  }
  if (server) SSL_set_accept_state(ssl);
  else SSL_set_connect_state(ssl);
  TlsAccess::session(fd) = ssl;
  return {};
}

Fd::Io tls_handshake_step(Fd& fd, short* events) {
  SSL* ssl = TlsAccess::session(fd);
  if (ssl == nullptr) return Fd::Io::done;
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl);
  if (rc == 1) return Fd::Io::done;
  const int saved_errno = errno;
  const int e = SSL_get_error(ssl, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    *events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    return Fd::Io::again;
  }
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && saved_errno == 0 && ERR_peek_error() == 0)) {
    ERR_clear_error();
    TlsAccess::error(fd) = "it closed the connection during the TLS handshake";
    return Fd::Io::closed;
  }
  TlsAccess::error(fd) = "TLS handshake failed: " + tls_error_text(ssl, saved_errno);
  return Fd::Io::failed;
}

Status tls_handshake(Fd& fd, ssl_ctx_st* ctx, bool server, Clock::time_point deadline, const std::string& who) {
  TROUPE_RETURN_IF_ERROR(start_tls(fd, ctx, server));
  for (;;) {
    short events = POLLIN;
    const auto r = tls_handshake_step(fd, &events);
    if (r == Fd::Io::done) return {};
    if (r != Fd::Io::again)
      return invalid_argument(who + ": " + fd.error() +
                              " (every node needs --tls-cert/--tls-key from the same --tls-ca)");
    if (Clock::now() >= deadline) return unavailable(who + " did not finish the TLS handshake in time");
    pollfd p{fd.get(), events, 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
}

}  // namespace troupe::cpu::tcp
