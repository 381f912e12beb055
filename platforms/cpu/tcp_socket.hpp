// The plain POSIX socket pieces under the CPU platform's TCP communicator
// (tcp_communicator.hpp): an owning fd, listening and connecting with
// deadlines, exact reads and writes bounded by a deadline, the little-endian
// encoding of the rendezvous messages, and the process-wide registry of
// listeners that Platform::make_communicator_id opens for rank 0.
//
// No serializer: the rendezvous messages are a few integers and strings in a
// fixed little-endian layout, and tensors travel as the raw bytes they are.
// Every socket is non-blocking and close-on-exec; every wait is a poll() with
// a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "troupe/status.hpp"

struct ssl_st;

namespace troupe::cpu::tcp {

using Clock = std::chrono::steady_clock;

/// Owns one file descriptor (closes it when destroyed) and, on a connection, the TLS
/// session on it when there is one (tcp_tls.hpp). Reads and writes go through it, so
/// callers never care which.
class Fd {
 public:
  enum class Io { done, again, closed, failed };

  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept { *this = std::move(o); }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
      tls_ = std::exchange(o.tls_, nullptr);
      read_wants_write_ = o.read_wants_write_;
      write_wants_read_ = o.write_wants_read_;
      error_ = std::move(o.error_);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

  bool tls() const { return tls_ != nullptr; }
  /// Up to `n` bytes in or out: done (`*count` of them), again (poll for events()), closed
  /// or failed (error() says why).
  Io read_some(void* data, size_t n, size_t* count);
  Io write_some(const void* data, size_t n, size_t* count);
  /// The poll() events to wait for before reading or writing again (TLS may need the other
  /// direction).
  short events(bool want_read, bool want_write) const;
  /// TLS holds decrypted bytes poll() cannot see: read again without waiting.
  bool pending() const;
  const std::string& error() const { return error_; }

 private:
  friend struct TlsAccess;  // tcp_tls.cpp: puts a session on the connection
  Io tls_result(int rc, bool reading);
  int fd_ = -1;
  ssl_st* tls_ = nullptr;
  bool read_wants_write_ = false, write_wants_read_ = false;
  std::string error_;
};

/// "host:port" ("[v6]:port" for an IPv6 literal).
std::string host_port(const std::string& host, uint16_t port);

/// A listening socket on `host` (a name or a literal address; port 0: any free port).
/// `port` gets the port it listens on.
Result<Fd> listen_on(const std::string& host, uint16_t wanted_port, uint16_t* port);
/// The numeric local address of a connected or bound socket ("10.0.0.5", "::1").
Result<std::string> local_host(int fd);
/// A connection to host:port, retrying a refused or unreachable address until `deadline`.
/// Non-blocking, TCP_NODELAY.
Result<Fd> connect_to(const std::string& host, uint16_t port, Clock::time_point deadline);
/// The next connection on `listener`, or none when `deadline` passes (ok with an invalid Fd).
/// Non-blocking, TCP_NODELAY.
Result<Fd> accept_until(int listener, Clock::time_point deadline);

/// Reads or writes exactly `n` bytes before `deadline`. Errors are unavailable and start
/// with `who` ("rank 0 (10.0.0.5:4000)"): it closed the connection, reset it, or was silent;
/// with TLS, invalid_argument when it refused this side's certificate (an alert).
Status write_all(Fd& fd, const void* data, size_t n, Clock::time_point deadline, const std::string& who);
Status read_all(Fd& fd, void* data, size_t n, Clock::time_point deadline, const std::string& who);

/// Little-endian writer of the rendezvous messages.
class Writer {
 public:
  void u32(uint32_t v);
  void u64(uint64_t v);
  void str(const std::string& s);
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

/// Reader of what Writer wrote; any short or oversized field makes ok() false.
class Reader {
 public:
  explicit Reader(std::string bytes) : in_(std::move(bytes)) {}
  uint32_t u32();
  uint64_t u64();
  std::string str();
  /// Every field read so far was there.
  bool good() const { return ok_; }
  /// And nothing is left over.
  bool ok() const { return ok_ && at_ == in_.size(); }

 private:
  bool take(void* out, size_t n);
  std::string in_;
  size_t at_ = 0;
  bool ok_ = true;
};

/// Largest rendezvous message accepted (a table of 256 ranks fits many times over).
constexpr uint32_t kMaxMessageBytes = 1 << 20;

/// Sends a length-prefixed message.
Status send_message(Fd& fd, const std::string& body, Clock::time_point deadline, const std::string& who);
/// Receives one length-prefixed message (at most kMaxMessageBytes).
Result<std::string> receive_message(Fd& fd, Clock::time_point deadline, const std::string& who);

struct Endpoint;  // tcp_rendezvous.hpp

/// The numeric remote address of a connected socket ("10.0.0.5:41234"), for log lines.
std::string peer_address(int fd);

/// A listener that make_communicator_id opened (and serves: open_endpoint) for rank 0 of a
/// world, until rank 0's make_device_communicator takes it.
struct PendingListener {
  std::shared_ptr<Endpoint> endpoint;
  std::string host;  // as written in the id
  uint16_t port = 0;
};

/// Keeps `listener` under `token` for `lifetime`; an entry not taken by then is closed the
/// next time the registry is used.
void register_listener(const std::string& token, PendingListener listener, std::chrono::milliseconds lifetime);
/// Takes the listener kept under `token`; not_found when this process holds none (made in
/// another process, taken already, or expired: the message tells which it can).
Result<PendingListener> take_listener(const std::string& token);
/// How many listeners the registry holds now (tests).
size_t registered_listeners();

}  // namespace troupe::cpu::tcp
