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

namespace troupe::cpu::tcp {

using Clock = std::chrono::steady_clock;

/// Owns one file descriptor (closes it when destroyed).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
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
/// with `who` ("rank 0 (10.0.0.5:4000)"): it closed the connection, reset it, or was silent.
Status write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& who);
Status read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& who);

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
Status send_message(int fd, const std::string& body, Clock::time_point deadline, const std::string& who);
/// Receives one length-prefixed message (at most kMaxMessageBytes).
Result<std::string> receive_message(int fd, Clock::time_point deadline, const std::string& who);

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
