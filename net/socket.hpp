// Plain POSIX sockets for every link between troupe processes (the link guard,
// the CPU platform's collectives): an owning descriptor, listening, connecting
// and accepting with deadlines, and the addresses log lines name. Every socket
// is non-blocking and close-on-exec; every wait is a poll() with a deadline;
// connections have TCP_NODELAY.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "troupe/status.hpp"

namespace troupe::net {

using Clock = std::chrono::steady_clock;

/// Owns one file descriptor: closes it when destroyed or reset.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives the descriptor up (the caller closes it).
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

/// Milliseconds until `deadline` for poll(): at least 0, at most a second (so callers look
/// at the clock, and at whatever else they wait for, again).
int poll_ms(Clock::time_point deadline);

/// "host:port" ("[v6]:port" for an IPv6 literal).
std::string host_port(const std::string& host, uint16_t port);

/// A listening socket on `host` (a name or a literal address; empty: every interface;
/// port 0: any free port); `*port` gets the port it listens on. Errors: invalid_argument
/// (the host does not resolve), unavailable (no address could be bound).
Result<Socket> listen_on(const std::string& host, uint16_t wanted_port, uint16_t* port);

/// Whether connect_to tries again after a refused or unreachable address.
enum class Retry { no, until_deadline };
/// A connection to host:port, each address tried once (Retry::no) or again every 20 ms
/// until `deadline`. Errors are unavailable, their message only the reason ("Connection
/// refused", "cannot resolve 'h': ...", "Connection timed out"): callers name the peer.
Result<Socket> connect_to(const std::string& host, uint16_t port, Clock::time_point deadline, Retry retry);

/// The next connection waiting on `listener`, or an invalid Socket when none is; an error
/// only when the listener itself failed.
Result<Socket> accept_next(int listener);
/// The next connection on `listener`, or an invalid Socket once `deadline` passed.
Result<Socket> accept_until(int listener, Clock::time_point deadline);

/// The numeric local address of a connected or bound socket ("10.0.0.5", "::1"; an IPv4
/// peer reached through an IPv6 socket in its plain IPv4 form).
Result<std::string> local_host(int fd);
/// The numeric remote address of a connected socket ("10.0.0.5:41234"), for log lines;
/// "an unknown peer" when it has none.
std::string peer_address(int fd);

}  // namespace troupe::net
