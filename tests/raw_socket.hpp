// Raw loopback sockets for tests that play a stranger on a listener (a node's
// link guard, the TCP communicator's rendezvous): connect, send what fits, read
// an exact count, and see whether the other side closes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace troupe::testing {

/// A connected socket to 127.0.0.1:`port`, or -1.
inline int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// A connection from `source` (a loopback address of its own, 127.x.y.z) to
/// 127.0.0.1:`port`, or -1: a stranger from another address, for per-source limits.
inline int connect_from(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &a.sin_addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Sends what fits (a closed connection ends it); the bytes sent.
inline size_t send_some(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  return done;
}

/// Reads exactly `n` bytes into *out; false on close, error or 10 s without data.
inline bool read_exact(int fd, std::string* out, size_t n) {
  out->assign(n, '\0');
  for (size_t done = 0; done < n;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return false;
    const ssize_t r = ::recv(fd, out->data() + done, n - done, 0);
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

/// Whether the other side closes (or resets) the connection within `timeout`, reading and
/// dropping whatever it sends before.
inline bool closed_within(int fd, std::chrono::seconds timeout) {
  char buf[4096];
  for (auto deadline = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < deadline;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return true;
  }
  return false;
}

}  // namespace troupe::testing
