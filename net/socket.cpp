#include "net/socket.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace troupe::net {
namespace {

using std::chrono::milliseconds;

std::string errno_text(int e) { return std::strerror(e); }

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// getaddrinfo's list, freed with it.
struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo() = default;
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
  ~AddrInfo() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

/// Resolves host:port for a stream socket; the reason when it does not resolve.
std::string resolve(const std::string& host, uint16_t port, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->list);
  return rc == 0 ? std::string() : "cannot resolve '" + host + "': " + gai_strerror(rc);
}

uint16_t port_of(const sockaddr_storage& sa) {
  return ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&sa)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&sa)->sin_port);
}

/// One non-blocking connect to `a`, waited for until `deadline`; *why says why it failed.
Socket connect_one(const addrinfo* a, Clock::time_point deadline, std::string* why) {
  Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
  if (!s.valid()) {
    *why = errno_text(errno);
    return Socket();
  }
  int err = 0;
  if (::connect(s.get(), a->ai_addr, a->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{s.get(), POLLOUT, 0};
      while (::poll(&p, 1, poll_ms(deadline)) == 0 && Clock::now() < deadline) {
      }
      socklen_t len = sizeof err;
      if (!(p.revents & (POLLOUT | POLLERR | POLLHUP))) err = ETIMEDOUT;
      else if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    *why = errno_text(err);
    return Socket();
  }
  set_nodelay(s.get());
  return s;
}

}  // namespace

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000));
}

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<Socket> listen_on(const std::string& host, uint16_t wanted_port, uint16_t* port) {
  AddrInfo ai;
  if (auto why = resolve(host, wanted_port, /*passive=*/true, &ai); !why.empty()) return invalid_argument(why);
  std::string last = "no address";
  for (const addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      last = errno_text(errno);
      continue;
    }
    int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    if (::bind(s.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(s.get(), SOMAXCONN) != 0 ||
        getsockname(s.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      last = errno_text(errno);
      continue;
    }
    *port = port_of(sa);
    return s;
  }
  return unavailable("cannot listen on " + host_port(host, wanted_port) + ": " + last);
}

Result<Socket> connect_to(const std::string& host, uint16_t port, Clock::time_point deadline, Retry retry) {
  std::string last = "no address";
  for (;;) {
    AddrInfo ai;
    if (auto why = resolve(host, port, /*passive=*/false, &ai); !why.empty()) return unavailable(why);
    for (const addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
      Socket s = connect_one(a, deadline, &last);
      if (s.valid()) return s;
    }
    if (retry == Retry::no || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return unavailable(last);
}

Result<Socket> accept_next(int listener) {
  for (;;) {
    Socket s(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (s.valid()) {
      set_nodelay(s.get());
      return s;
    }
    const int e = errno;
    if (e == EINTR || e == ECONNABORTED) continue;
    if (e == EAGAIN || e == EWOULDBLOCK) return Socket();
    return unavailable("accept failed: " + errno_text(e));
  }
}

Result<Socket> accept_until(int listener, Clock::time_point deadline) {
  for (;;) {
    auto s = accept_next(listener);
    if (!s.ok() || s->valid() || Clock::now() >= deadline) return s;
    pollfd p{listener, POLLIN, 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
}

Result<std::string> local_host(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return unavailable("getsockname failed: " + errno_text(errno));
  char host[NI_MAXHOST] = {};
  const int rc = getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  if (rc != 0) return unavailable(std::string("getnameinfo failed: ") + gai_strerror(rc));
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7);
  return h;
}

std::string peer_address(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "an unknown peer";
  return host_port(host, port_of(sa));
}

}  // namespace troupe::net
