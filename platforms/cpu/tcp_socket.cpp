#include "platforms/cpu/tcp_socket.hpp"

#include "platforms/cpu/tcp_tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace troupe::cpu::tcp {
namespace {

using std::chrono::milliseconds;

std::string errno_text(int e) { return std::strerror(e); }

/// Milliseconds until `deadline` for poll(), at least 0, at most a second (so callers look
/// at the clock again).
int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

Status resolve(const std::string& host, uint16_t port, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->list);
  if (rc != 0) return invalid_argument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  return {};
}

}  // namespace

void Fd::reset() {
  if (tls_ != nullptr) {
    ERR_clear_error();
    if (SSL_is_init_finished(tls_)) SSL_shutdown(tls_);  // one close_notify, not waited for
    SSL_free(tls_);
    tls_ = nullptr;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  read_wants_write_ = write_wants_read_ = false;
}

Fd::Io Fd::tls_result(int rc, bool reading) {
  const int saved_errno = errno;
  const int e = SSL_get_error(tls_, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    if (reading) read_wants_write_ = e == SSL_ERROR_WANT_WRITE;
    else write_wants_read_ = e == SSL_ERROR_WANT_READ;
    return Io::again;
  }
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && saved_errno == 0 && ERR_peek_error() == 0)) {
    ERR_clear_error();
    error_ = "it closed the connection";
    return Io::closed;
  }
  error_ = tls_error_text(tls_, e == SSL_ERROR_SYSCALL ? saved_errno : 0);
  return Io::failed;
}

Fd::Io Fd::read_some(void* data, size_t n, size_t* count) {
  *count = 0;
  if (tls_ == nullptr) {
    const ssize_t r = ::recv(fd_, data, n, 0);
    if (r > 0) {
      *count = static_cast<size_t>(r);
      return Io::done;
    }
    if (r == 0) {
      error_ = "it closed the connection";
      return Io::closed;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::again;
    error_ = errno_text(errno);
    return Io::failed;
  }
  ERR_clear_error();
  read_wants_write_ = false;
  const int r = SSL_read(tls_, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (r > 0) {
    *count = static_cast<size_t>(r);
    return Io::done;
  }
  return tls_result(r, true);
}

Fd::Io Fd::write_some(const void* data, size_t n, size_t* count) {
  *count = 0;
  if (n == 0) return Io::done;
  if (tls_ == nullptr) {
    const ssize_t w = ::send(fd_, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      *count = static_cast<size_t>(w);
      return Io::done;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Io::again;
    error_ = w == 0 ? "the connection closed" : errno_text(errno);
    return Io::failed;
  }
  ERR_clear_error();
  write_wants_read_ = false;
  const int w = SSL_write(tls_, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (w > 0) {
    *count = static_cast<size_t>(w);
    return Io::done;
  }
  return tls_result(w, false);
}

short Fd::events(bool want_read, bool want_write) const {
  short ev = 0;
  if (want_read) ev |= read_wants_write_ ? POLLOUT : POLLIN;
  if (want_write) ev |= write_wants_read_ ? POLLIN : POLLOUT;
  return ev;
}

bool Fd::pending() const { return tls_ != nullptr && SSL_has_pending(tls_) == 1; }

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<Fd> listen_on(const std::string& host, uint16_t wanted_port, uint16_t* port) {
  AddrInfo ai;
  TROUPE_RETURN_IF_ERROR(resolve(host, wanted_port, /*passive=*/true, &ai));
  std::string last = "no address";
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = errno_text(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last = errno_text(errno);
      continue;
    }
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      last = errno_text(errno);
      continue;
    }
    *port = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
    return fd;
  }
  return unavailable("cannot listen on " + host_port(host, wanted_port) + ": " + last);
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
  // An IPv4 peer reached through an IPv6 socket: keep the plain IPv4 form.
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
  return host_port(host, static_cast<uint16_t>(std::atoi(serv)));
}

Result<Fd> connect_to(const std::string& host, uint16_t port, Clock::time_point deadline) {
  std::string last = "no attempt";
  for (;;) {
    AddrInfo ai;
    TROUPE_RETURN_IF_ERROR(resolve(host, port, /*passive=*/false, &ai));
    for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd.valid()) {
        last = errno_text(errno);
        continue;
      }
      int err = 0;
      if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          pollfd p{fd.get(), POLLOUT, 0};
          while (::poll(&p, 1, poll_ms(deadline)) == 0 && Clock::now() < deadline) {
          }
          socklen_t len = sizeof err;
          if (!(p.revents & (POLLOUT | POLLERR | POLLHUP)))
            err = ETIMEDOUT;
          else if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        }
      }
      if (err == 0) {
        set_nodelay(fd.get());
        return fd;
      }
      last = errno_text(err);
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return unavailable("cannot connect to " + host_port(host, port) + ": " + last);
}

Result<Fd> accept_until(int listener, Clock::time_point deadline) {
  for (;;) {
    Fd fd(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.valid()) {
      set_nodelay(fd.get());
      return fd;
    }
    const int e = errno;
    if (e != EAGAIN && e != EWOULDBLOCK && e != ECONNABORTED && e != EINTR)
      return unavailable("accept failed: " + errno_text(e));
    if (Clock::now() >= deadline) return Fd();
    pollfd p{listener, POLLIN, 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
}

Status write_all(Fd& fd, const void* data, size_t n, Clock::time_point deadline, const std::string& who) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    size_t put = 0;
    const auto r = fd.write_some(p + done, n - done, &put);
    if (r == Fd::Io::done) {
      done += put;
      continue;
    }
    if (r == Fd::Io::failed && fd.tls()) return invalid_argument(who + " refused the TLS connection: " + fd.error());
    if (r != Fd::Io::again) return unavailable(who + " closed or reset the connection (" + fd.error() + ")");
    if (Clock::now() >= deadline) return unavailable(who + " did not take what was sent in time");
    pollfd pf{fd.get(), fd.events(false, true), 0};
    ::poll(&pf, 1, poll_ms(deadline));
  }
  return {};
}

Status read_all(Fd& fd, void* data, size_t n, Clock::time_point deadline, const std::string& who) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    size_t got = 0;
    const auto r = fd.read_some(p + done, n - done, &got);
    if (r == Fd::Io::done) {
      done += got;
      continue;
    }
    if (r == Fd::Io::closed) return unavailable(who + " closed the connection");
    // A TLS alert here is the peer refusing this side's certificate (TLS 1.3 tells the
    // connecting side after its half of the handshake).
    if (r == Fd::Io::failed && fd.tls()) return invalid_argument(who + " refused the TLS connection: " + fd.error());
    if (r == Fd::Io::failed) return unavailable(who + " reset the connection (" + fd.error() + ")");
    if (Clock::now() >= deadline) return unavailable(who + " did not answer in time");
    pollfd pf{fd.get(), fd.events(true, false), 0};
    ::poll(&pf, 1, poll_ms(deadline));
  }
  return {};
}

void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  out_ += s;
}

bool Reader::take(void* out, size_t n) {
  if (!ok_ || in_.size() - at_ < n) return ok_ = false;
  std::memcpy(out, in_.data() + at_, n);
  at_ += n;
  return true;
}
uint32_t Reader::u32() {
  uint8_t b[4] = {};
  if (!take(b, 4)) return 0;
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}
uint64_t Reader::u64() {
  uint8_t b[8] = {};
  if (!take(b, 8)) return 0;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | b[i];
  return v;
}
std::string Reader::str() {
  const uint32_t n = u32();
  if (!ok_ || in_.size() - at_ < n) {
    ok_ = false;
    return {};
  }
  std::string s = in_.substr(at_, n);
  at_ += n;
  return s;
}

Status send_message(Fd& fd, const std::string& body, Clock::time_point deadline, const std::string& who) {
  Writer w;
  w.u32(static_cast<uint32_t>(body.size()));
  std::string framed = w.bytes() + body;
  return write_all(fd, framed.data(), framed.size(), deadline, who);
}

Result<std::string> receive_message(Fd& fd, Clock::time_point deadline, const std::string& who) {
  uint8_t len_bytes[4] = {};
  TROUPE_RETURN_IF_ERROR(read_all(fd, len_bytes, 4, deadline, who));
  const uint32_t len = Reader(std::string(reinterpret_cast<char*>(len_bytes), 4)).u32();
  if (len > kMaxMessageBytes)
    return invalid_argument(who + " sent a rendezvous message of " + std::to_string(len) + " bytes (at most " +
                            std::to_string(kMaxMessageBytes) + "): not a troupe cpu communicator peer");
  std::string body(len, '\0');
  TROUPE_RETURN_IF_ERROR(read_all(fd, body.data(), len, deadline, who));
  return body;
}

namespace {

struct Registry {
  struct Entry {
    PendingListener listener;
    Clock::time_point expires;
  };
  std::mutex mu;
  std::map<std::string, Entry> entries;
  std::map<std::string, Clock::time_point> expired;  // tokens closed unused (for the error message)

  void sweep() {
    const auto now = Clock::now();
    for (auto it = entries.begin(); it != entries.end();) {
      if (it->second.expires <= now) {
        expired[it->first] = now;
        it = entries.erase(it);  // closes the listener
      } else {
        ++it;
      }
    }
    if (expired.size() > 1024) expired.erase(expired.begin());
  }
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: listeners die with the process
  return *r;
}

}  // namespace

void register_listener(const std::string& token, PendingListener listener, milliseconds lifetime) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.sweep();
  r.entries[token] = Registry::Entry{std::move(listener), Clock::now() + lifetime};
}

Result<PendingListener> take_listener(const std::string& token) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.sweep();
  auto it = r.entries.find(token);
  if (it == r.entries.end()) {
    if (r.expired.count(token))
      return not_found("its listener was closed: nobody used the id before it expired");
    return not_found("this process holds no listener for it (the id was made in another process, or a rank 0 "
                     "took it already: an id serves one world)");
  }
  PendingListener out = std::move(it->second.listener);
  r.entries.erase(it);
  return out;
}

size_t registered_listeners() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.sweep();
  return r.entries.size();
}

}  // namespace troupe::cpu::tcp
