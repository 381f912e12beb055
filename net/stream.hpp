// One non-blocking connection to another troupe process, with TLS on it or not
// (tls.hpp): the link guard's relays, the CPU collectives' links and both
// sides of the handshake (handshake.hpp) read and write through it, and ask it
// which poll events it waits for (TLS may need to write while reading, and
// read while writing). Its TLS session's transport is the socket without
// SIGPIPE (tls_socket.hpp).
#pragma once

#include <string>
#include <utility>

#include "net/socket.hpp"
#include "net/tls.hpp"
#include "troupe/status.hpp"

struct ssl_st;

namespace troupe::net {

class Stream {
 public:
  enum class Io { done, again, closed, failed };

  Stream() = default;
  /// Plain TCP on `socket`.
  explicit Stream(Socket socket) : socket_(std::move(socket)) {}
  /// TLS on `socket`, accepting (`server`) or connecting. A connecting side with a
  /// `dialed_host` checks that the peer's certificate names it (a DNS or IP subject
  /// alternative name); without one, the chain to the cluster CA is all it checks. Fails
  /// only when OpenSSL cannot make the session (the socket is closed then).
  static Result<Stream> tls(Socket socket, const TlsContext& ctx, bool server, const std::string& dialed_host);
  ~Stream() { close(); }
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int fd() const { return socket_.get(); }
  bool is_open() const { return socket_.valid(); }
  bool is_tls() const { return ssl_ != nullptr; }
  /// Drives the TLS handshake: done (also at once for plain TCP), again (poll for events()),
  /// closed or failed (error() says why: the peer's certificate, an alert it sent, not TLS).
  Io handshake();
  bool handshake_done() const { return ssl_ == nullptr || handshake_done_; }
  /// Up to `n` bytes; `*got` of them arrived when done.
  Io read(void* data, size_t n, size_t* got);
  /// Up to `n` bytes; `*put` of them went out when done.
  Io write(const void* data, size_t n, size_t* put);
  /// The poll() events to wait for, given what the caller wants to do next (during the TLS
  /// handshake: what the handshake waits for).
  short events(bool want_read, bool want_write) const;
  /// TLS holds decrypted bytes that poll() cannot see: read again without waiting.
  bool pending() const;
  /// Why the last operation closed or failed.
  const std::string& error() const { return error_; }
  /// Sends TLS's close_notify (not waited for) and closes the socket.
  void close();

 private:
  Io result(int rc, const char* what, bool reading);
  Socket socket_;
  ssl_st* ssl_ = nullptr;
  bool handshake_done_ = false;
  short handshake_wants_ = 0;  // POLLIN or POLLOUT while the handshake waits
  bool read_wants_write_ = false, write_wants_read_ = false;
  std::string error_;
};

}  // namespace troupe::net
