// Mutual TLS on the links between troupe processes (OpenSSL's libssl), for
// the link guard (link_guard.hpp) and the links it dials.
//
// Why here and not in CAF's openssl module: CAF's middleman never listens on
// the network (it publishes on 127.0.0.1 behind the link guard, which bounds
// what a peer may send before CAF reads a byte), so the guard is the only
// place that sees the remote side of a link; TLS terminates there and CAF
// keeps speaking plain BASP over loopback.
//
// A TlsContext holds this process's certificate and key and the cluster CA:
// TLS 1.3 at least, and both sides must present a certificate that chains to
// that CA (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT); no other trust
// store is used. The dialing side also checks that the listener's certificate
// names the host it dialed (a DNS or IP subject alternative name).
//
// A LinkStream is one non-blocking socket to another process, with TLS on it
// or not: the relays' poll loops read and write through it and ask it which
// poll events it waits for (TLS may need to write while reading, and read
// while writing).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "troupe/status.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace troupe::actors {

/// --tls-cert, --tls-key, --tls-ca: PEM files.
struct TlsFiles {
  std::string cert;  // this process's certificate (chain), PEM
  std::string key;   // its private key, PEM
  std::string ca;    // the cluster CA every peer's certificate must chain to, PEM
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

class TlsContext {
 public:
  /// Loads and checks the three files; none given: null. Errors (invalid_argument or
  /// not_found) are one line naming the flag and the file: some but not all three given,
  /// unreadable, not PEM, a key that does not match the certificate.
  static Result<std::shared_ptr<const TlsContext>> load(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* native() const { return ctx_; }
  const TlsFiles& files() const { return files_; }

 private:
  TlsContext() = default;
  ssl_ctx_st* ctx_ = nullptr;
  TlsFiles files_;
};

/// One end of a link to another process: a non-blocking socket it owns, with TLS or not.
class LinkStream {
 public:
  enum class Io { done, again, closed, failed };

  LinkStream() = default;
  /// Plain TCP on `fd` (taken over).
  explicit LinkStream(int fd) : fd_(fd) {}
  /// TLS on `fd` (taken over), accepting (`server`) or connecting; a connecting side checks
  /// that the peer's certificate names `dialed_host`. Fails only when OpenSSL cannot make
  /// the session (the fd is closed then).
  static Result<LinkStream> tls(int fd, const TlsContext& ctx, bool server, const std::string& dialed_host);
  ~LinkStream() { close(); }
  LinkStream(LinkStream&& o) noexcept;
  LinkStream& operator=(LinkStream&& o) noexcept;
  LinkStream(const LinkStream&) = delete;
  LinkStream& operator=(const LinkStream&) = delete;

  int fd() const { return fd_; }
  /// Gives up the socket of a plain stream (to put TLS on it).
  int release_fd() { return std::exchange(fd_, -1); }
  bool open() const { return fd_ >= 0; }
  bool is_tls() const { return ssl_ != nullptr; }
  /// Drives the TLS handshake: done (also at once for plain TCP), again (poll for events()),
  /// closed or failed (error() says why: the peer's certificate, an alert it sent, not TLS).
  Io handshake();
  /// Up to `n` bytes; `*got` of them arrived when done.
  Io read(char* data, size_t n, size_t* got);
  /// Up to `n` bytes; `*put` of them went out when done.
  Io write(const char* data, size_t n, size_t* put);
  /// The poll() events to wait for, given what the caller wants to do next.
  short events(bool want_read, bool want_write) const;
  /// TLS holds decrypted bytes that poll() cannot see: read again without waiting.
  bool pending() const;
  /// Why the last operation closed or failed.
  const std::string& error() const { return error_; }
  void close();

 private:
  Io result(int rc, const char* what, bool reading);
  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  bool handshake_done_ = false;
  short handshake_wants_ = 0;  // POLLIN or POLLOUT while the handshake waits
  bool read_wants_write_ = false, write_wants_read_ = false;
  std::string error_;
};

}  // namespace troupe::actors
