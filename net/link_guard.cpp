#include "net/link_guard.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
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

#include "net/basp_frames.hpp"
#include "net/handshake.hpp"
#include "net/refusal_log.hpp"
#include "net/socket.hpp"
#include "net/stream.hpp"
#include "troupe/log.hpp"

namespace troupe::net {
namespace {

using std::chrono::milliseconds;

constexpr size_t kRelayChunk = 256 << 10;  // bytes read from one side before they are written to the other

/// The link guard's handshake: its magic and label are what every troupe link has spoken.
const HandshakeSpec& link_handshake() {
  static const HandshakeSpec spec{
      "troupeLK",
      "troupe link v1",
      "the troupe link handshake",
      "secret",
      "the link handshake",
      "both sides need --tls-cert/--tls-key from the same --tls-ca; the certificate must name the address dialed",
      "",
  };
  return spec;
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

/// What a connection's handshake slots are counted by: its source address, an IPv6 one by
/// its /64 (one host or site usually holds a whole /64), an IPv4-mapped one as IPv4.
std::string source_key(int fd) {
  sockaddr_storage st{};
  socklen_t len = sizeof st;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&st), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {0};
  if (st.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&st)->sin_addr, text, sizeof text);
    return text;
  }
  if (st.ss_family == AF_INET6) {
    in6_addr a = reinterpret_cast<sockaddr_in6*>(&st)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      ::inet_ntop(AF_INET, a.s6_addr + 12, text, sizeof text);
      return text;
    }
    std::memset(a.s6_addr + 8, 0, 8);
    ::inet_ntop(AF_INET6, &a, text, sizeof text);
    return std::string(text) + "/64";
  }
  return "?";
}

/// A connected Unix socket pair, both ends non-blocking and close-on-exec.
Status socket_pair(Socket* ours, Socket* theirs) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
    return unavailable(std::string("cannot create a socket pair: ") + std::strerror(errno));
  *ours = Socket(fds[0]);
  *theirs = Socket(fds[1]);
  return {};
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
  /// A connection in the guard's handshake (TLS first when on, then the secret handshake).
  struct Handshake {
    ServerHandshake hs;
    std::string peer;
    std::string source;  // what its slot is counted by (source_key)
    bool shared = false;  // in a shared slot (its source's own were taken)
    Clock::time_point deadline;
  };
  /// A relayed connection: `outer` is the remote side (its BASP checked), `inner` this
  /// process's end of a Unix socket pair (CAF has the other).
  struct Pair {
    Stream outer;
    Socket inner;
    std::string label;
    std::string to_inner, to_outer;
    size_t to_inner_done = 0, to_outer_done = 0;
    std::string outer_end;  // why the remote side ended; the pair closes once to_inner is out
    BaspFrameCheck check;
    explicit Pair(uint32_t cap) : check(cap) {}
  };

  // Server side (a LinkGuard); unused by the dialing relay.
  Socket listener;
  AdoptLink adopt;
  LinkAuth auth;
  std::string what;
  LinkLimits limits;
  RefusalLog refusals{"link guard"};

  std::mutex mu;  // guards `incoming` (dial_link hands links over)
  std::vector<Pair> incoming;
  Socket wake_read, wake_write;
  std::atomic<bool> stop{false};
  std::thread thread;

  std::list<Handshake> handshakes;
  std::map<std::string, size_t> own_by_source;  // own slots in use, by source
  size_t own_in_use = 0;
  size_t shared_in_use = 0;
  std::list<Pair> pairs;

  Relay() {
    int wake[2];
    if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) == 0) wake_read = Socket(wake[0]), wake_write = Socket(wake[1]);
  }
  ~Relay() {
    stop = true;
    poke();
    if (thread.joinable()) thread.join();
  }

  void poke() {
    if (wake_write.valid()) {
      const char c = 1;
      (void)::write(wake_write.get(), &c, 1);
    }
  }

  void start() { thread = std::thread([this] { run(); }); }

  void hand_over(Pair p) {
    {
      std::lock_guard lock(mu);
      incoming.push_back(std::move(p));
    }
    poke();
  }

  // -- server: accepting and the handshake --

  /// A slot for a connection from `source`: its own while it has fewer than the per-source
  /// count, else a shared one; false when neither is free.
  bool take_slot(const std::string& source, bool* shared) {
    size_t& own = own_by_source[source];
    if (own < limits.handshakes_per_source && own_in_use < limits.max_own_handshakes) {
      ++own;
      ++own_in_use;
      *shared = false;
      return true;
    }
    if (own == 0) own_by_source.erase(source);
    if (shared_in_use < limits.max_handshakes) {
      ++shared_in_use;
      *shared = true;
      return true;
    }
    return false;
  }

  void free_slot(const std::string& source, bool shared) {
    if (shared) {
      --shared_in_use;
      return;
    }
    --own_in_use;
    auto it = own_by_source.find(source);
    if (it != own_by_source.end() && --it->second == 0) own_by_source.erase(it);
  }

  void accept_all() {
    for (;;) {
      auto s = accept_next(listener.get());
      if (!s.ok() || !s->valid()) return;
      const std::string peer = peer_address(s->get());
      const std::string source = source_key(s->get());
      bool shared = false;
      if (!take_slot(source, &shared)) {
        const auto own = own_by_source.find(source);
        refusals.refuse("handshake_slots",
                        fmt::format("{} refused a peer ({}): no handshake slot free ({} of its {} own, {} of {} "
                                    "shared, in use)",
                                    what, peer, own == own_by_source.end() ? 0 : own->second,
                                    limits.handshakes_per_source, shared_in_use, limits.max_handshakes));
        continue;
      }
      Stream stream;
      if (auth.tls) {
        auto t = Stream::tls(std::move(*s), *auth.tls, /*server=*/true, "");
        if (!t.ok()) {
          TROUPE_LOG_ERROR("{} dropped a connection from {}: {}", what, peer, t.status().message());
          free_slot(source, shared);
          continue;
        }
        stream = std::move(*t);
      } else {
        stream = Stream(std::move(*s));
      }
      handshakes.push_back(Handshake{ServerHandshake(std::move(stream), link_handshake(), auth.secret), peer, source,
                                     shared, Clock::now() + limits.handshake_timeout});
      if (!step(handshakes.back(), POLLOUT)) {
        free_slot(source, shared);
        handshakes.pop_back();
      }
    }
  }

  /// Progress of one handshake: false when it is over (dropped, or handed to a pair).
  bool step(Handshake& h, short revents) {
    if (Clock::now() >= h.deadline) {
      refusals.refuse("handshake_timeout",
                      fmt::format("{} refused a peer ({}): it did not finish the link handshake within {} ms{}", what,
                                  h.peer, limits.handshake_timeout.count(),
                                  h.hs.tls_done() ? ""
                                                  : " (TLS: a peer without TLS waits for a challenge that never comes)"));
      return false;
    }
    switch (h.hs.step(revents)) {
      case ServerHandshake::State::running:
        return true;
      case ServerHandshake::State::refused:
        refusals.refuse("handshake_refused", fmt::format("{} refused a peer ({}): {}", what, h.peer, h.hs.why()));
        return false;
      case ServerHandshake::State::left:
        refusals.refuse("handshake_left",
                        fmt::format("{}: a peer ({}) left during the link handshake: {}", what, h.peer, h.hs.why()),
                        log::Level::info);
        return false;
      case ServerHandshake::State::accepted:
        break;
    }
    Pair p(limits.max_frame_bytes);
    Socket theirs;
    if (Status st = socket_pair(&p.inner, &theirs); !st.ok()) {
      TROUPE_LOG_ERROR("{}: cannot take the link from {}: {}", what, h.peer, st.message());
      return false;
    }
    if (Status st = adopt(std::move(theirs)); !st.ok()) {
      TROUPE_LOG_ERROR("{}: its actor system cannot take the link from {}: {}", what, h.peer, st.message());
      return false;
    }
    p.outer = std::move(h.hs.stream());
    p.label = what + " link from " + h.peer + (p.outer.is_tls() ? " (TLS)" : "");
    pairs.push_back(std::move(p));
    TROUPE_LOG_DEBUG("{} passed the link handshake", pairs.back().label);
    return false;
  }

  // -- relaying --

  /// Remote -> CAF: reads what the remote side sent (TLS hands out one record per read: take
  /// what is there) and checks its BASP framing. False once the pair is to be closed; `*why`
  /// and `*warn` say why.
  bool read_outer(Pair& p, std::string* why, bool* warn) {
    p.to_inner.resize(kRelayChunk);
    size_t have = 0;
    for (;;) {
      size_t got = 0;
      const auto r = p.outer.read(p.to_inner.data() + have, kRelayChunk - have, &got);
      if (r == Stream::Io::done) {
        have += got;
        if (p.outer.is_tls() && have < kRelayChunk) continue;
        break;
      }
      if (r == Stream::Io::closed) p.outer_end = "the remote side closed it";
      if (r == Stream::Io::failed) p.outer_end = p.outer.error();
      break;
    }
    p.to_inner.resize(have);
    p.to_inner_done = 0;
    if (have > 0 && !p.check.feed(reinterpret_cast<const uint8_t*>(p.to_inner.data()), have)) {
      *why = "the remote side sent " + p.check.error();
      *warn = true;
      return false;
    }
    if (have == 0 && !p.outer_end.empty()) {
      *why = p.outer_end;
      return false;
    }
    return true;
  }

  /// Writes what each side has pending; false (with `*why`) once a side failed.
  static bool write_pending(Pair& p, std::string* why) {
    while (p.to_inner_done < p.to_inner.size()) {
      const ssize_t w = ::send(p.inner.get(), p.to_inner.data() + p.to_inner_done,
                               p.to_inner.size() - p.to_inner_done, MSG_NOSIGNAL);
      if (w > 0) {
        p.to_inner_done += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      *why = "this process's side failed";
      return false;
    }
    if (p.to_inner_done == p.to_inner.size()) p.to_inner.clear(), p.to_inner_done = 0;
    while (p.to_outer_done < p.to_outer.size()) {
      size_t put = 0;
      const auto r = p.outer.write(p.to_outer.data() + p.to_outer_done, p.to_outer.size() - p.to_outer_done, &put);
      if (r == Stream::Io::done) {
        p.to_outer_done += put;
        continue;
      }
      if (r == Stream::Io::again) break;
      *why = "the remote side failed: " + p.outer.error();
      return false;
    }
    if (p.to_outer_done == p.to_outer.size()) p.to_outer.clear(), p.to_outer_done = 0;
    return true;
  }

  /// Moves bytes of one pair; false once the pair is closed.
  bool relay(Pair& p, short outer_ev, short inner_ev) {
    auto end = [&](const std::string& why, bool warn) {
      if (warn) refusals.refuse("frame", fmt::format("{}: dropped: {}", p.label, why));
      else TROUPE_LOG_DEBUG("{}: closed: {}", p.label, why);
      p.outer.close();
      p.inner.reset();
      return false;
    };
    // A side that hung up or failed while the other side's writes are pending would wake
    // poll() at once forever: end the pair (nothing more can reach a side that is gone).
    const bool in_busy = p.to_inner_done < p.to_inner.size(), out_busy = p.to_outer_done < p.to_outer.size();
    if ((outer_ev & POLLERR) || (inner_ev & POLLERR) || (in_busy && (outer_ev & POLLHUP)) ||
        (out_busy && (inner_ev & POLLHUP)))
      return end("a side hung up", false);
    if (!p.outer_end.empty() && !in_busy) return end(p.outer_end, false);
    std::string why;
    bool warn = false;
    if (p.outer_end.empty() && !in_busy && (outer_ev != 0 || p.outer.pending()) && !read_outer(p, &why, &warn))
      return end(why, warn);
    // CAF -> remote.
    if (p.to_outer_done == p.to_outer.size() && (inner_ev & (POLLIN | POLLHUP | POLLERR))) {
      p.to_outer.resize(kRelayChunk);
      const ssize_t r = ::recv(p.inner.get(), p.to_outer.data(), kRelayChunk, 0);
      if (r == 0) return end("this process closed it", false);
      if (r < 0) {
        p.to_outer.clear();
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return end(std::strerror(errno), false);
      } else {
        p.to_outer.resize(static_cast<size_t>(r));
        p.to_outer_done = 0;
      }
    }
    if (!write_pending(p, &why)) return end(why, false);
    if (!p.outer_end.empty() && p.to_inner.empty()) return end(p.outer_end, false);
    return true;
  }

  // -- the loop --

  /// One round: poll everything, then serve whatever is ready.
  void round(std::vector<pollfd>& fds) {
    {
      std::lock_guard lock(mu);
      for (auto& p : incoming) pairs.push_back(std::move(p));
      incoming.clear();
    }
    refusals.flush();
    fds.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    if (listener.valid()) fds.push_back({listener.get(), POLLIN, 0});
    const size_t hs0 = fds.size();
    auto next = Clock::now() + milliseconds(1000);
    for (auto& h : handshakes) {
      fds.push_back({h.hs.fd(), h.hs.events(), 0});
      next = std::min(next, h.deadline);
      if (h.hs.ready()) next = Clock::now();
    }
    const size_t p0 = fds.size();
    for (auto& p : pairs) {
      const bool in_busy = p.to_inner_done < p.to_inner.size(), out_busy = p.to_outer_done < p.to_outer.size();
      fds.push_back({p.outer.fd(), p.outer.events(!in_busy && p.outer_end.empty(), out_busy), 0});
      fds.push_back({p.inner.get(), static_cast<short>((out_busy ? 0 : POLLIN) | (in_busy ? POLLOUT : 0)), 0});
      // Bytes TLS decrypted already (poll cannot see them), or an end to deliver.
      if (!in_busy && (p.outer.pending() || !p.outer_end.empty())) next = Clock::now();
    }
    ::poll(fds.data(), fds.size(), poll_ms(next));
    if (stop) return;
    if (fds[0].revents) {
      char buf[64];
      while (::read(wake_read.get(), buf, sizeof buf) > 0) {
      }
    }
    if (listener.valid() && fds[1].revents) accept_all();
    size_t i = hs0;
    for (auto it = handshakes.begin(); it != handshakes.end(); ++i) {
      // Handshakes accepted above this round have no poll entry yet: give them a zero round.
      const bool polled = i < p0 && fds[i].fd == it->hs.fd();
      if (!step(*it, polled ? fds[i].revents : short(0))) {
        free_slot(it->source, it->shared);
        it = handshakes.erase(it);
      } else {
        ++it;
      }
    }
    i = p0;
    for (auto it = pairs.begin(); it != pairs.end(); i += 2) {
      // Pairs added above this round have no poll entry yet: give them a zero round.
      const bool polled = i + 1 < fds.size() && fds[i].fd == it->outer.fd() && fds[i + 1].fd == it->inner.get();
      if (!relay(*it, polled ? fds[i].revents : short(0), polled ? fds[i + 1].revents : short(0)))
        it = pairs.erase(it);
      else
        ++it;
    }
  }

  void run() {
    std::vector<pollfd> fds;
    while (!stop) round(fds);
  }
};

Result<std::unique_ptr<LinkGuard>> LinkGuard::listen(const std::string& host, uint16_t port, AdoptLink adopt,
                                                     LinkAuth auth, std::string what, LinkLimits limits) {
  std::unique_ptr<LinkGuard> g(new LinkGuard());
  g->relay_ = std::make_unique<Relay>();
  if (!g->relay_->wake_read.valid())
    return unavailable(std::string("link guard: cannot create a pipe: ") + std::strerror(errno));
  auto listener = listen_on(host, port, &g->port_);
  if (!listener.ok()) return listener.status();
  g->relay_->listener = std::move(*listener);
  g->relay_->adopt = std::move(adopt);
  g->relay_->auth = std::move(auth);
  g->relay_->what = std::move(what);
  g->relay_->limits = limits;
  g->relay_->start();
  return g;
}

LinkGuard::~LinkGuard() = default;

std::map<std::string, uint64_t> LinkGuard::refusals() const { return relay_->refusals.counts(); }

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

}  // namespace

Result<Socket> dial_link(const std::string& host, uint16_t port, const LinkAuth& auth, const std::string& what,
                         milliseconds timeout) {
  auto limits = link_limits_from_env();
  if (!limits.ok()) return limits.status();
  const std::string where = what + " " + host_port(host, port);
  const auto deadline = Clock::now() + timeout;
  auto socket = connect_to(host, port, deadline, Retry::no);
  if (!socket.ok()) return unavailable("cannot reach the " + where + ": " + socket.status().message());
  Stream outer;
  if (auth.tls) {
    auto t = Stream::tls(std::move(*socket), *auth.tls, /*server=*/false, host);
    if (!t.ok()) return t.status();
    outer = std::move(*t);
  } else {
    outer = Stream(std::move(*socket));
  }
  if (Status s = client_handshake(outer, link_handshake(), auth.secret, deadline, "the " + where); !s.ok()) {
    // A refusal (of our proof or certificate, or of theirs) is logged here too; so is
    // anything over TLS, whose failures name the certificate at fault.
    if (outer.is_tls() || s.code() == StatusCode::invalid_argument) TROUPE_LOG_ERROR("{}", s.message());
    return s;
  }
  LinkGuard::Relay::Pair p(limits->max_frame_bytes);
  Socket theirs;
  if (Status st = socket_pair(&p.inner, &theirs); !st.ok()) return st;
  p.outer = std::move(outer);
  p.label = "link to the " + where + (p.outer.is_tls() ? " (TLS)" : "");
  dial_relay(*limits)->hand_over(std::move(p));
  return theirs;
}

}  // namespace troupe::net
