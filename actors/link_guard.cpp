#include "actors/link_guard.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/basp_frames.hpp"
#include "net/crypto.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kMagic[8] = {'t', 'r', 'o', 'u', 'p', 'e', 'L', 'K'};
constexpr uint8_t kVersion = 1;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kChallengeBytes = sizeof kMagic + 1 + kNonceBytes;            // guard -> peer
constexpr size_t kAnswerBytes = sizeof kMagic + kNonceBytes + kProofBytes;     // peer -> guard
constexpr size_t kVerdictBytes = 1 + kProofBytes;                              // guard -> peer
constexpr size_t kRelayChunk = 256 << 10;  // bytes read from one side before they are written to the other

std::string proof(const std::string& secret, const char* role, const std::string& nonce_s, const std::string& nonce_c) {
  const auto d = crypto::hmac_sha256(secret, std::string("troupe link v1 ") + role + nonce_s + nonce_c);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string errno_text(int e) { return std::strerror(e); }

int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

/// "10.0.0.5:41234" for the remote end of a connected socket.
std::string peer_text(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "an unknown peer";
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "an unknown peer";
  const std::string h = host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + serv;
}

std::string host_port(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<int> listen_on(const std::string& host, uint16_t wanted, uint16_t* port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(wanted);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list); rc != 0)
    return invalid_argument("cannot resolve '" + host + "': " + gai_strerror(rc));
  std::string last = "no address";
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno_text(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      last = errno_text(errno);
      ::close(fd);
      continue;
    }
    *port = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
    freeaddrinfo(list);
    return fd;
  }
  freeaddrinfo(list);
  return unavailable("cannot listen on " + host_port(host, wanted) + ": " + last);
}

Result<int> connect_until(const std::string& host, uint16_t port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list); rc != 0)
    return unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  std::string last = "no address";
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno_text(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        while (::poll(&p, 1, poll_ms(deadline)) == 0 && Clock::now() < deadline) {
        }
        socklen_t len = sizeof err;
        if (!(p.revents & (POLLOUT | POLLERR | POLLHUP))) err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      freeaddrinfo(list);
      return fd;
    }
    last = errno_text(err);
    ::close(fd);
  }
  freeaddrinfo(list);
  return unavailable(last);
}

/// Exactly `n` bytes through `s` before `deadline` (the dialing side's handshake).
Status io_exact(LinkStream& s, char* data, size_t n, bool writing, Clock::time_point deadline, const std::string& who) {
  size_t done = 0;
  while (done < n) {
    size_t k = 0;
    const auto r = writing ? s.write(data + done, n - done, &k) : s.read(data + done, n - done, &k);
    if (r == LinkStream::Io::done) {
      done += k;
      continue;
    }
    if (r == LinkStream::Io::closed)
      return unavailable(who + " closed the connection during the link handshake" +
                         (s.is_tls() ? " (" + s.error() + ")" : ""));
    if (r == LinkStream::Io::failed) {
      // A TLS alert here is the guard refusing our certificate (TLS 1.3 tells the client after
      // its side of the handshake is over).
      if (s.is_tls()) return invalid_argument(who + " refused the TLS connection: " + s.error());
      return unavailable(who + " reset the connection during the link handshake (" + s.error() + ")");
    }
    if (Clock::now() >= deadline) return unavailable(who + " did not answer the link handshake in time");
    pollfd p{s.fd(), s.events(!writing, writing), 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
  return {};
}

Result<milliseconds> seconds_env(const char* name, milliseconds fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(s > 0) || s > 86400)
    return invalid_argument(std::string(name) + " must be a positive number of seconds, got '" + env + "'");
  return milliseconds(static_cast<int64_t>(s * 1000));
}

}  // namespace

Result<LinkLimits> link_limits_from_env() {
  LinkLimits l;
  if (const char* env = std::getenv("TROUPE_LINK_MAX_FRAME_MB"); env && *env) {
    char* end = nullptr;
    const long mb = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || mb < 1 || mb > 4095)
      return invalid_argument(std::string("TROUPE_LINK_MAX_FRAME_MB must be a whole number of MiB in 1..4095, got '") +
                              env + "'");
    l.max_frame_bytes = static_cast<uint32_t>(mb) << 20;
  }
  auto t = seconds_env("TROUPE_LINK_HANDSHAKE_TIMEOUT_S", l.handshake_timeout);
  if (!t.ok()) return t.status();
  l.handshake_timeout = *t;
  return l;
}

// -- The relay: one thread, one poll() over everything ---------------------------------------

struct LinkGuard::Relay {
  /// A connection in the guard's handshake: TLS first (when on), then the secret handshake.
  struct Handshake {
    LinkStream s;
    std::string peer;
    Clock::time_point deadline;
    bool tls_done = false;  // the TLS handshake is over (or there is none)
    std::string nonce;
    std::string out;       // challenge, then verdict
    size_t out_done = 0;
    std::string in;        // the answer, kAnswerBytes
    bool accepted = false; // the verdict is being written: relay once it is out
  };
  /// A dialed link waiting for CAF's connection on a one-shot loopback listener.
  struct Waiting {
    int listener = -1;
    LinkStream outer;
    std::string label;
    Clock::time_point deadline;
  };
  /// A relayed connection: `outer` is the remote side (its BASP checked), `inner` CAF's.
  struct Pair {
    LinkStream outer;
    int inner = -1;
    std::string label;
    std::string to_inner, to_outer;
    size_t to_inner_done = 0, to_outer_done = 0;
    std::string outer_end;  // why the remote side ended; the pair closes once to_inner is out
    BaspFrameCheck check;
    explicit Pair(uint32_t cap) : check(cap) {}
  };

  // Server side (a LinkGuard); unused by the dialing relay.
  int listener = -1;
  uint16_t inner_port = 0;
  LinkAuth auth;
  std::string what;
  LinkLimits limits;

  std::mutex mu;                 // guards `incoming` (dial_link hands links over)
  std::vector<Waiting> incoming;
  int wake[2] = {-1, -1};
  std::atomic<bool> stop{false};
  std::thread thread;

  std::list<Handshake> handshakes;
  std::vector<Waiting> waiting;
  std::list<Pair> pairs;

  Relay() {
    if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) wake[0] = wake[1] = -1;
  }
  ~Relay() {
    stop = true;
    poke();
    if (thread.joinable()) thread.join();
    close_fd(listener);
    handshakes.clear();
    for (auto& w : waiting) close_fd(w.listener);
    for (auto& w : incoming) close_fd(w.listener);
    for (auto& p : pairs) close_fd(p.inner);
    close_fd(wake[0]);
    close_fd(wake[1]);
  }

  void poke() {
    if (wake[1] >= 0) {
      const char c = 1;
      (void)::write(wake[1], &c, 1);
    }
  }

  void start() { thread = std::thread([this] { run(); }); }

  void hand_over(Waiting w) {
    {
      std::lock_guard lock(mu);
      incoming.push_back(std::move(w));
    }
    poke();
  }

  // -- server: accepting and the handshake --

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      const std::string peer = peer_text(fd);
      if (handshakes.size() >= limits.max_handshakes) {
        TROUPE_LOG_WARNING("{} dropped a connection from {}: {} connections are in their handshake already", what,
                           peer, handshakes.size());
        ::close(fd);
        continue;
      }
      Handshake h;
      h.peer = peer;
      h.deadline = Clock::now() + limits.handshake_timeout;
      if (auth.tls) {
        auto s = LinkStream::tls(fd, *auth.tls, /*server=*/true, "");
        if (!s.ok()) {
          TROUPE_LOG_ERROR("{} dropped a connection from {}: {}", what, peer, s.status().message());
          continue;
        }
        h.s = std::move(*s);
      } else {
        h.s = LinkStream(fd);
        if (!start_secret_handshake(h)) continue;
      }
      handshakes.push_back(std::move(h));
      if (!step(handshakes.back(), POLLOUT)) handshakes.pop_back();
    }
  }

  /// Queues the challenge; false (logged, closed) when no nonce could be made.
  bool start_secret_handshake(Handshake& h) {
    h.tls_done = true;
    auto nonce = crypto::random_bytes(kNonceBytes);
    if (!nonce.ok()) {
      TROUPE_LOG_ERROR("{} dropped a connection from {}: {}", what, h.peer, nonce.status().message());
      h.s.close();
      return false;
    }
    h.nonce = std::move(*nonce);
    h.out = std::string(kMagic, sizeof kMagic) + static_cast<char>(kVersion) + h.nonce;
    h.out_done = 0;
    return true;
  }

  /// Writes what is pending; false when the connection failed.
  static bool flush(Handshake& h) {
    while (h.out_done < h.out.size()) {
      size_t put = 0;
      const auto r = h.s.write(h.out.data() + h.out_done, h.out.size() - h.out_done, &put);
      if (r == LinkStream::Io::done) {
        h.out_done += put;
        continue;
      }
      return r == LinkStream::Io::again;
    }
    return true;
  }

  /// Progress of one handshake: false when it is over (dropped, or handed to a pair).
  bool step(Handshake& h, short revents) {
    auto drop = [&](const std::string& why, bool warn) {
      if (warn) TROUPE_LOG_WARNING("{} refused a peer ({}): {}", what, h.peer, why);
      else TROUPE_LOG_INFO("{}: a peer ({}) left during the link handshake: {}", what, h.peer, why);
      h.s.close();
      return false;
    };
    if (!h.accepted && Clock::now() >= h.deadline)
      return drop("it did not finish the link handshake within " +
                      std::to_string(limits.handshake_timeout.count()) + " ms" +
                      (h.tls_done ? "" : " (TLS: a peer without TLS waits for a challenge that never comes)"),
                  true);
    if (!h.tls_done) {
      const auto r = h.s.handshake();
      if (r == LinkStream::Io::again) return true;
      // A peer that is refused (its certificate) or refuses ours (an alert) is logged as refused.
      if (r != LinkStream::Io::done) return drop("TLS handshake failed: " + h.s.error(), true);
      if (!start_secret_handshake(h)) return false;
      revents = POLLOUT;
    }
    if ((revents & POLLOUT) && !flush(h)) return drop("the connection failed: " + h.s.error(), false);
    if (h.accepted) {
      if (h.out_done < h.out.size()) return true;
      auto fd = connect_until("127.0.0.1", inner_port, Clock::now() + milliseconds(2000));
      if (!fd.ok()) {
        TROUPE_LOG_ERROR("{}: cannot reach its own actor system on 127.0.0.1:{}: {}", what, inner_port,
                         fd.status().message());
        h.s.close();
        return false;
      }
      Pair p(limits.max_frame_bytes);
      p.outer = std::move(h.s);
      p.inner = *fd;
      p.label = what + " link from " + h.peer + (p.outer.is_tls() ? " (TLS)" : "");
      pairs.push_back(std::move(p));
      TROUPE_LOG_DEBUG("{} passed the link handshake", pairs.back().label);
      return false;
    }
    if (revents != 0 || h.s.pending()) {
      char buf[kAnswerBytes];
      size_t got = 0;
      const auto r = h.s.read(buf, kAnswerBytes - h.in.size(), &got);
      if (r == LinkStream::Io::again) return true;
      if (r == LinkStream::Io::closed) return drop("it closed the connection", false);
      if (r == LinkStream::Io::failed) return drop(h.s.error(), h.s.is_tls());
      h.in.append(buf, got);
      if (h.in.size() < kAnswerBytes) return true;
      if (h.in.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
        return drop("it does not speak the troupe link handshake (another program, or a troupe older than it)",
                    true);
      const std::string nonce_c = h.in.substr(sizeof kMagic, kNonceBytes);
      const std::string got_proof = h.in.substr(sizeof kMagic + kNonceBytes, kProofBytes);
      if (!crypto::equal_constant_time(got_proof, proof(auth.secret, "client", h.nonce, nonce_c))) {
        // Told, so the refused side can say why; nothing else follows.
        h.out = std::string(1, '\1') + std::string(kProofBytes, '\0');
        h.out_done = 0;
        flush(h);
        return drop("wrong secret", true);
      }
      h.out = std::string(1, '\0') + proof(auth.secret, "server", h.nonce, nonce_c);
      h.out_done = 0;
      h.accepted = true;
      if (!flush(h)) return drop("the connection failed: " + h.s.error(), false);
      return step(h, 0);
    }
    return true;
  }

  // -- relaying --

  /// Moves bytes of one pair; false once the pair is closed.
  bool relay(Pair& p, short outer_ev, short inner_ev) {
    auto end = [&](const std::string& why, bool warn) {
      if (warn) TROUPE_LOG_WARNING("{}: dropped: {}", p.label, why);
      else TROUPE_LOG_DEBUG("{}: closed: {}", p.label, why);
      p.outer.close();
      close_fd(p.inner);
      return false;
    };
    // A side that hung up or failed while the other side's writes are pending would wake
    // poll() at once forever: end the pair (nothing more can reach a side that is gone).
    const bool in_busy = p.to_inner_done < p.to_inner.size(), out_busy = p.to_outer_done < p.to_outer.size();
    if ((outer_ev & POLLERR) || (inner_ev & POLLERR) || (in_busy && (outer_ev & POLLHUP)) ||
        (out_busy && (inner_ev & POLLHUP)))
      return end("a side hung up", false);
    if (!p.outer_end.empty() && !in_busy) return end(p.outer_end, false);
    // Remote -> CAF, checked. TLS hands out one record per read: take what is there.
    if (p.outer_end.empty() && !in_busy && (outer_ev != 0 || p.outer.pending())) {
      p.to_inner.resize(kRelayChunk);
      size_t have = 0;
      for (;;) {
        size_t got = 0;
        const auto r = p.outer.read(p.to_inner.data() + have, kRelayChunk - have, &got);
        if (r == LinkStream::Io::done) {
          have += got;
          if (p.outer.is_tls() && have < kRelayChunk) continue;
          break;
        }
        if (r == LinkStream::Io::closed) p.outer_end = "the remote side closed it";
        if (r == LinkStream::Io::failed) p.outer_end = p.outer.error();
        break;
      }
      p.to_inner.resize(have);
      p.to_inner_done = 0;
      if (have > 0 && !p.check.feed(reinterpret_cast<const uint8_t*>(p.to_inner.data()), have))
        return end("the remote side sent " + p.check.error(), true);
      if (have == 0 && !p.outer_end.empty()) return end(p.outer_end, false);
    }
    // CAF -> remote.
    if (p.to_outer_done == p.to_outer.size() && (inner_ev & (POLLIN | POLLHUP | POLLERR))) {
      p.to_outer.resize(kRelayChunk);
      const ssize_t r = ::recv(p.inner, p.to_outer.data(), kRelayChunk, 0);
      if (r == 0) return end("this process closed it", false);
      if (r < 0) {
        p.to_outer.clear();
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return end(errno_text(errno), false);
      } else {
        p.to_outer.resize(static_cast<size_t>(r));
        p.to_outer_done = 0;
      }
    }
    // To CAF's side.
    while (p.to_inner_done < p.to_inner.size()) {
      const ssize_t w =
          ::send(p.inner, p.to_inner.data() + p.to_inner_done, p.to_inner.size() - p.to_inner_done, MSG_NOSIGNAL);
      if (w > 0) {
        p.to_inner_done += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      return end("this process's side failed", false);
    }
    if (p.to_inner_done == p.to_inner.size()) p.to_inner.clear(), p.to_inner_done = 0;
    // To the remote side.
    while (p.to_outer_done < p.to_outer.size()) {
      size_t put = 0;
      const auto r = p.outer.write(p.to_outer.data() + p.to_outer_done, p.to_outer.size() - p.to_outer_done, &put);
      if (r == LinkStream::Io::done) {
        p.to_outer_done += put;
        continue;
      }
      if (r == LinkStream::Io::again) break;
      return end("the remote side failed: " + p.outer.error(), false);
    }
    if (p.to_outer_done == p.to_outer.size()) p.to_outer.clear(), p.to_outer_done = 0;
    if (!p.outer_end.empty() && p.to_inner.empty()) return end(p.outer_end, false);
    return true;
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      if (stop) return;
      {
        std::lock_guard lock(mu);
        for (auto& w : incoming) waiting.push_back(std::move(w));
        incoming.clear();
      }
      fds.clear();
      fds.push_back({wake[0], POLLIN, 0});
      if (listener >= 0) fds.push_back({listener, POLLIN, 0});
      const size_t hs0 = fds.size();
      auto next = Clock::now() + milliseconds(1000);
      for (auto& h : handshakes) {
        fds.push_back({h.s.fd(), h.s.events(true, h.out_done < h.out.size()), 0});
        next = std::min(next, h.deadline);
        if (h.s.pending()) next = Clock::now();
      }
      const size_t w0 = fds.size();
      for (auto& w : waiting) {
        fds.push_back({w.listener, POLLIN, 0});
        next = std::min(next, w.deadline);
      }
      const size_t p0 = fds.size();
      for (auto& p : pairs) {
        const bool in_busy = p.to_inner_done < p.to_inner.size(), out_busy = p.to_outer_done < p.to_outer.size();
        fds.push_back({p.outer.fd(), p.outer.events(!in_busy && p.outer_end.empty(), out_busy), 0});
        fds.push_back({p.inner, static_cast<short>((out_busy ? 0 : POLLIN) | (in_busy ? POLLOUT : 0)), 0});
        // Bytes TLS decrypted already (poll cannot see them), or an end to deliver.
        if (!in_busy && (p.outer.pending() || !p.outer_end.empty())) next = Clock::now();
      }
      ::poll(fds.data(), fds.size(), poll_ms(next));
      if (stop) return;
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake[0], buf, sizeof buf) > 0) {
        }
      }
      if (listener >= 0 && fds[1].revents) accept_all();
      {
        size_t i = hs0;
        for (auto it = handshakes.begin(); it != handshakes.end(); ++i) {
          // Handshakes accepted above this round have no poll entry yet: give them a zero round.
          const bool polled = i < w0 && fds[i].fd == it->s.fd();
          if (!step(*it, polled ? fds[i].revents : short(0))) it = handshakes.erase(it);
          else ++it;
        }
      }
      {
        const auto now = Clock::now();
        std::vector<Waiting> keep;
        for (size_t k = 0; k < waiting.size(); ++k) {
          Waiting& w = waiting[k];
          if (w0 + k < p0 && fds[w0 + k].revents) {
            int inner = ::accept4(w.listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (inner >= 0) {
              close_fd(w.listener);  // one connection per dialed link
              Pair p(limits.max_frame_bytes);
              p.outer = std::move(w.outer);
              p.inner = inner;
              p.label = w.label;
              pairs.push_back(std::move(p));
              continue;
            }
          }
          if (now >= w.deadline) {
            TROUPE_LOG_DEBUG("{}: nothing in this process took the link in time", w.label);
            close_fd(w.listener);
            w.outer.close();
            continue;
          }
          keep.push_back(std::move(w));
        }
        waiting = std::move(keep);
      }
      {
        size_t i = p0;
        for (auto it = pairs.begin(); it != pairs.end(); i += 2) {
          // Pairs added above this round have no poll entry yet: give them a zero round.
          const bool polled = i + 1 < fds.size() && fds[i].fd == it->outer.fd() && fds[i + 1].fd == it->inner;
          if (!relay(*it, polled ? fds[i].revents : short(0), polled ? fds[i + 1].revents : short(0)))
            it = pairs.erase(it);
          else
            ++it;
        }
      }
    }
  }
};

Result<std::unique_ptr<LinkGuard>> LinkGuard::listen(const std::string& host, uint16_t port, uint16_t inner_port,
                                                     LinkAuth auth, std::string what, LinkLimits limits) {
  std::unique_ptr<LinkGuard> g(new LinkGuard());
  g->relay_ = std::make_unique<Relay>();
  if (g->relay_->wake[0] < 0) return unavailable("link guard: cannot create a pipe: " + errno_text(errno));
  auto fd = listen_on(host, port, &g->port_);
  if (!fd.ok()) return fd.status();
  g->relay_->listener = *fd;
  g->relay_->inner_port = inner_port;
  g->relay_->auth = std::move(auth);
  g->relay_->what = std::move(what);
  g->relay_->limits = limits;
  g->relay_->start();
  return g;
}

LinkGuard::~LinkGuard() = default;

namespace {

/// The relay of every link this process dials, started with the first.
LinkGuard::Relay* dial_relay(const LinkLimits& limits) {
  static std::mutex mu;
  static LinkGuard::Relay* relay = nullptr;  // never destroyed: links die with the process
  std::lock_guard lock(mu);
  if (relay == nullptr) {
    relay = new LinkGuard::Relay();
    relay->limits = limits;
    relay->what = "link";
    relay->start();
  }
  return relay;
}

/// The client side of the TLS handshake on `s`, blocking until `deadline`.
Status tls_handshake(LinkStream& s, Clock::time_point deadline, const std::string& who) {
  for (;;) {
    const auto r = s.handshake();
    if (r == LinkStream::Io::done) return {};
    if (r != LinkStream::Io::again)
      return invalid_argument("TLS handshake with the " + who + " failed: " + s.error() +
                              " (both sides need --tls-cert/--tls-key from the same --tls-ca; the certificate "
                              "must name the address dialed)");
    if (Clock::now() >= deadline)
      return unavailable("the " + who + " did not finish the TLS handshake in time (does it run with TLS?)");
    pollfd p{s.fd(), s.events(true, false), 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
}

}  // namespace

Result<uint16_t> dial_link(const std::string& host, uint16_t port, const LinkAuth& auth, const std::string& what,
                           milliseconds timeout) {
  auto limits = link_limits_from_env();
  if (!limits.ok()) return limits.status();
  const std::string where = what + " " + host_port(host, port);
  const auto deadline = Clock::now() + timeout;
  auto fd = connect_until(host, port, deadline);
  if (!fd.ok()) return unavailable("cannot reach the " + where + ": " + fd.status().message());
  LinkStream outer(*fd);
  auto fail = [&](Status s) {
    outer.close();
    return s;
  };
  if (auth.tls) {
    auto t = LinkStream::tls(outer.release_fd(), *auth.tls, /*server=*/false, host);
    if (!t.ok()) return t.status();
    outer = std::move(*t);
    if (Status s = tls_handshake(outer, deadline, where); !s.ok()) {
      TROUPE_LOG_ERROR("{}", s.message());
      return fail(s);
    }
  }
  auto logged = [&](Status s) {
    if (outer.is_tls()) TROUPE_LOG_ERROR("{}", s.message());
    return fail(s);
  };
  std::string challenge(kChallengeBytes, '\0');
  Status s = io_exact(outer, challenge.data(), challenge.size(), false, deadline, "the " + where);
  if (!s.ok()) return logged(s);
  if (challenge.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0 ||
      static_cast<uint8_t>(challenge[sizeof kMagic]) != kVersion)
    return fail(unavailable("the " + where +
                            " does not speak the troupe link handshake (another program, or another troupe version)"));
  const std::string nonce_s = challenge.substr(sizeof kMagic + 1, kNonceBytes);
  auto nonce_c = crypto::random_bytes(kNonceBytes);
  if (!nonce_c.ok()) return fail(nonce_c.status());
  std::string answer =
      std::string(kMagic, sizeof kMagic) + *nonce_c + proof(auth.secret, "client", nonce_s, *nonce_c);
  s = io_exact(outer, answer.data(), answer.size(), true, deadline, "the " + where);
  if (!s.ok()) return logged(s);
  std::string verdict(kVerdictBytes, '\0');
  s = io_exact(outer, verdict.data(), verdict.size(), false, deadline, "the " + where);
  if (!s.ok()) return logged(s);
  if (verdict[0] != 0) {
    TROUPE_LOG_ERROR("the {} refused the connection: wrong secret", where);
    return fail(invalid_argument("the " + where + " refused the connection: wrong secret"));
  }
  if (!crypto::equal_constant_time(verdict.substr(1), proof(auth.secret, "server", nonce_s, *nonce_c))) {
    TROUPE_LOG_ERROR("the {} did not prove the secret: it is not the peer we share it with", where);
    return fail(invalid_argument("the " + where + " did not prove the cluster secret (wrong secret on its side, or "
                                 "another program at its address)"));
  }
  uint16_t local = 0;
  auto l = listen_on("127.0.0.1", 0, &local);
  if (!l.ok()) return fail(l.status());
  LinkGuard::Relay::Waiting w;
  w.listener = *l;
  w.outer = std::move(outer);
  w.label = "link to the " + where + (w.outer.is_tls() ? " (TLS)" : "");
  w.deadline = Clock::now() + std::max(timeout, milliseconds(10'000));
  dial_relay(*limits)->hand_over(std::move(w));
  return local;
}

}  // namespace troupe::actors
