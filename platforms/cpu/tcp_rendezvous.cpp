#include "platforms/cpu/tcp_rendezvous.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include <openssl/rand.h>

#include "platforms/cpu/host_communicator.hpp"  // seconds_text, comm_timeout_from_env
#include "platforms/cpu/tcp_auth.hpp"
#include "platforms/cpu/tcp_tls.hpp"
#include "troupe/log.hpp"

namespace troupe::cpu {

using std::chrono::milliseconds;

// -- Ids --------------------------------------------------------------------------------

Result<TcpId> parse_tcp_id(const std::string& id) {
  const std::string shape = "'" + id + "' is not a cpu tcp communicator id (cpu-tcp:<host>:<port>:<token>)";
  if (id.rfind(kTcpIdPrefix, 0) != 0) return invalid_argument(shape);
  const std::string rest = id.substr(std::strlen(kTcpIdPrefix));
  const size_t t = rest.rfind(':');
  if (t == std::string::npos || t == 0) return invalid_argument(shape);
  const size_t p = rest.rfind(':', t - 1);
  if (p == std::string::npos || p == 0) return invalid_argument(shape);
  TcpId out;
  out.host = rest.substr(0, p);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  const std::string port = rest.substr(p + 1, t - p - 1);
  out.token = rest.substr(t + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535)
    return invalid_argument(shape + ": bad port '" + port + "'");
  out.port = static_cast<uint16_t>(std::stoi(port));
  if (out.token.empty() || out.token.size() > 200 ||
      out.token.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
          std::string::npos)
    return invalid_argument(shape + ": bad token");
  return out;
}

Result<std::string> make_tcp_communicator_id(const std::string& host, milliseconds unused_lifetime,
                                             const std::string& secret) {
  if (host.empty()) return invalid_argument("a cpu tcp communicator needs the host rank 0 listens on");
  uint16_t port = 0;
  auto fd = tcp::listen_on(host, 0, &port);
  if (!fd.ok()) return Status(fd.status().code(), "cpu communicator: " + fd.status().message());
  // The token names the world (a stale id is told apart); it is no credential: every
  // connection proves the cluster secret (tcp_auth.hpp).
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) return unavailable("cpu communicator: no random bytes for an id");
  char token[40] = {};
  for (size_t i = 0; i < sizeof raw; ++i) std::snprintf(token + 2 * i, 3, "%02x", raw[i]);
  const std::string id = std::string(kTcpIdPrefix) + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                         ":" + std::to_string(port) + ":" + token;
  auto ep = tcp::open_endpoint(std::move(*fd), token, id, secret);
  if (!ep.ok()) return ep.status();
  tcp::PendingListener l;
  l.endpoint = std::move(*ep);
  l.host = host;
  l.port = port;
  tcp::register_listener(token, std::move(l), unused_lifetime);
  return id;
}

namespace tcp {
namespace {

// -- Rendezvous messages -------------------------------------------------------------

constexpr uint64_t kMagic = 0x6370747075'6f7274ull;  // "troupetc"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kJoin = 1;  // a rank > 0 to rank 0: here I am, send me the table
constexpr uint32_t kPair = 2;  // a rank to a lower one: this connection is our link
// A peer has this long to send its hello after connecting (a stranger that never speaks
// must not hold up the ranks behind it for the whole timeout).
constexpr auto kHelloWait = std::chrono::seconds(10);
// Bounds on what a peer may make a listener hold: a hello (a few strings), connections in
// their handshake, and authenticated links not yet taken.
constexpr uint32_t kMaxHelloBytes = 64 << 10;
constexpr size_t kMaxPending = 64;
constexpr size_t kMaxArrived = 1024;

struct Hello {
  uint32_t kind = 0;
  uint32_t world = 0;
  uint32_t rank = 0;
  std::string token;
  std::string channel;
  std::string host;   // its listener (kJoin)
  uint32_t port = 0;
};

std::string encode(const Hello& h) {
  Writer w;
  w.u64(kMagic);
  w.u32(kVersion);
  w.u32(h.kind);
  w.u32(h.world);
  w.u32(h.rank);
  w.str(h.token);
  w.str(h.channel);
  w.str(h.host);
  w.u32(h.port);
  return w.bytes();
}

bool decode(std::string bytes, Hello* h) {
  Reader r(std::move(bytes));
  if (r.u64() != kMagic || r.u32() != kVersion) return false;
  h->kind = r.u32();
  h->world = r.u32();
  h->rank = r.u32();
  h->token = r.str();
  h->channel = r.str();
  h->host = r.str();
  h->port = r.u32();
  return r.ok();
}

std::string reply_ok(const std::vector<Address>* table) {
  Writer w;
  w.u64(kMagic);
  w.u32(0);
  w.str("");
  if (table) {
    w.u32(static_cast<uint32_t>(table->size()));
    for (const auto& a : *table) {
      w.str(a.host);
      w.u32(a.port);
    }
  }
  return w.bytes();
}

std::string reply_refused(StatusCode code, const std::string& message) {
  Writer w;
  w.u64(kMagic);
  w.u32(static_cast<uint32_t>(code));
  w.str(message);
  return w.bytes();
}

/// The answer of the rank `who` to a hello: ok (with the table when `table` is given) or
/// its refusal as a Status.
Status read_reply(Fd& fd, Clock::time_point deadline, const std::string& who, const std::string& me,
                  std::vector<Address>* table) {
  auto body = receive_message(fd, deadline, who);
  if (!body.ok()) return body.status();
  Reader r(std::move(*body));
  if (r.u64() != kMagic) return invalid_argument(who + " is not a troupe cpu communicator rank");
  const uint32_t code = r.u32();
  std::string message = r.str();
  if (code != 0) {
    const auto c = code <= static_cast<uint32_t>(StatusCode::internal) ? static_cast<StatusCode>(code)
                                                                         : StatusCode::internal;
    return Status(c, who + " refused " + me + ": " + message);
  }
  if (table) {
    const uint32_t n = r.u32();
    if (n > 4096) return invalid_argument(who + " sent a table of " + std::to_string(n) + " ranks");
    table->clear();
    for (uint32_t i = 0; i < n && r.good(); ++i) {
      Address a;
      a.host = r.str();
      a.port = static_cast<uint16_t>(r.u32());
      table->push_back(std::move(a));
    }
  }
  if (!r.ok()) return invalid_argument(who + " sent a malformed answer");
  return {};
}

void refuse(Fd& fd, StatusCode code, const std::string& message) {
  // Best effort, briefly: the peer learns why; a peer that does not read gets nothing more.
  (void)send_message(fd, reply_refused(code, message), Clock::now() + milliseconds(500), "the peer");
}

}  // namespace

std::string rank_text(int r, const Address& a) {
  return "rank " + std::to_string(r) + " (" + host_port(a.host, a.port) + ")";
}

// -- Endpoint: a rank's listener, served by a thread of its own ----------------------------

// Every connection is accepted at once and must pass the handshake (tcp_auth.hpp) and send
// its hello within the auth wait, or it is closed and logged: nothing sits unread on a
// listener, whether or not a rank is waiting for links right now.
struct Endpoint {
  std::string token;
  std::string id;
  std::string secret;
  ssl_ctx_st* tls = nullptr;  // TLS on every connection (tcp_tls.hpp), or none
  milliseconds auth_wait{10'000};

  std::mutex mu;
  std::condition_variable arrived_cv;
  struct Arrived {
    Fd fd;
    Hello hello;
  };
  std::deque<Arrived> arrived;  // authenticated hellos not yet taken, oldest first
  int refused = 0;              // connections refused (no proof, a malformed hello, a wrong token)
  Status broken;                // the listener failed

  Fd listener;
  int wake[2] = {-1, -1};
  std::atomic<bool> stop{false};
  std::thread thread;

  /// A connection in its handshake.
  struct Pending {
    Fd fd;
    std::string peer;
    Clock::time_point deadline;
    bool tls_done = true;        // the TLS handshake is over (or there is none)
    short tls_events = POLLIN;   // what the TLS handshake waits for
    std::string nonce_s;
    std::string out;
    size_t out_done = 0;
    std::string in;
    bool authenticated = false;  // the verdict went out: the hello follows
    uint32_t hello_bytes = 0;    // its length, once its 4-byte prefix arrived
  };
  std::list<Pending> pending;

  ~Endpoint() {
    stop = true;
    if (wake[1] >= 0) (void)::write(wake[1], "x", 1);
    if (thread.joinable()) thread.join();
    if (wake[0] >= 0) ::close(wake[0]);
    if (wake[1] >= 0) ::close(wake[1]);
  }

  void refuse_logged(Pending& p, const std::string& why) {
    TROUPE_LOG_WARNING("cpu communicator {}: refused a connection from {}: {}", id, p.peer, why);
    {
      std::lock_guard lock(mu);
      ++refused;
    }
    p.fd.reset();
  }

  static bool flush(Pending& p) {
    while (p.out_done < p.out.size()) {
      size_t put = 0;
      const auto r = p.fd.write_some(p.out.data() + p.out_done, p.out.size() - p.out_done, &put);
      if (r == Fd::Io::done) {
        p.out_done += put;
        continue;
      }
      return r == Fd::Io::again;
    }
    return true;
  }

  /// Queues the challenge of the handshake on the secret; false (logged) when it cannot.
  bool challenge(Pending& p) {
    auto c = make_challenge(&p.nonce_s);
    if (!c.ok()) {
      refuse_logged(p, c.status().message());
      return false;
    }
    p.out = std::move(*c);
    p.out_done = 0;
    if (!flush(p)) {
      refuse_logged(p, "it reset the connection");
      return false;
    }
    return true;
  }

  /// Progress of one connection; false once it is closed or handed over.
  bool step(Pending& p, short revents) {
    if (!p.tls_done) {
      if (Clock::now() >= p.deadline) {
        refuse_logged(p, "it did not finish the TLS handshake within " + seconds_text(auth_wait) +
                             " s (a peer without TLS waits for a challenge that never comes)");
        return false;
      }
      const auto r = tls_handshake_step(p.fd, &p.tls_events);
      if (r == Fd::Io::again) return true;
      if (r != Fd::Io::done) {
        refuse_logged(p, p.fd.error());
        return false;
      }
      p.tls_done = true;
      if (!challenge(p)) return false;
      revents = 0;
    }
    if ((revents & POLLOUT) && !flush(p)) {
      refuse_logged(p, "it reset the connection during the handshake");
      return false;
    }
    if (Clock::now() >= p.deadline) {
      refuse_logged(p, std::string(p.authenticated ? "it sent no hello" : "it did not pass the handshake") +
                           " within " + seconds_text(auth_wait) + " s");
      return false;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)) && !p.fd.pending()) return true;
    // What is wanted next: the answer (fixed size), the hello's length, then the hello.
    size_t want = 0;
    if (!p.authenticated) want = kAuthAnswerBytes - p.in.size();
    else if (p.in.size() < 4) want = 4 - p.in.size();
    else want = 4 + p.hello_bytes - p.in.size();
    std::string buf(std::min<size_t>(want, 64 << 10), '\0');
    size_t got = 0;
    const auto r = p.fd.read_some(buf.data(), buf.size(), &got);
    if (r == Fd::Io::again) return true;
    if (r == Fd::Io::closed) {
      refuse_logged(p, "it closed the connection during the handshake");
      return false;
    }
    if (r == Fd::Io::failed) {
      refuse_logged(p, "it reset the connection during the handshake (" + p.fd.error() + ")");
      return false;
    }
    p.in.append(buf.data(), got);
    if (!p.authenticated) {
      if (p.in.size() < kAuthAnswerBytes) return true;
      bool ok = false;
      std::string why;
      p.out = judge_answer(secret, p.nonce_s, p.in, &ok, &why);
      p.out_done = 0;
      p.in.clear();
      const bool sent = flush(p);
      if (!ok || !sent) {
        refuse_logged(p, ok ? "it reset the connection during the handshake" : why);
        return false;
      }
      p.authenticated = true;
      return true;
    }
    if (p.in.size() == 4) {
      p.hello_bytes = Reader(p.in).u32();
      if (p.hello_bytes > kMaxHelloBytes) {
        refuse_logged(p, "a hello of " + std::to_string(p.hello_bytes) + " bytes (at most " +
                             std::to_string(kMaxHelloBytes) + ")");
        return false;
      }
    }
    if (p.in.size() < 4 + size_t{p.hello_bytes}) return true;
    Hello h;
    if (!decode(p.in.substr(4), &h)) {
      refuse(p.fd, StatusCode::invalid_argument, "not a troupe cpu communicator hello (or another version)");
      refuse_logged(p, "it is not a troupe cpu communicator hello (or another troupe version)");
      return false;
    }
    if (h.token != token) {
      refuse(p.fd, StatusCode::invalid_argument,
             "the communicator token does not match (a stale or foreign communicator id)");
      TROUPE_LOG_WARNING("cpu communicator {}: refused rank {}: its communicator token does not match (a stale "
                         "or foreign communicator id; from {})", id, h.rank, p.peer);
      {
        std::lock_guard lock(mu);
        ++refused;
      }
      p.fd.reset();
      return false;
    }
    {
      std::lock_guard lock(mu);
      if (arrived.size() >= kMaxArrived) {
        ++refused;
        TROUPE_LOG_WARNING("cpu communicator {}: refused rank {} ({}): {} links wait already", id, h.rank, p.peer,
                           arrived.size());
        p.fd.reset();
        return false;
      }
      arrived.push_back({std::move(p.fd), std::move(h)});
    }
    arrived_cv.notify_all();
    return false;
  }

  void accept_all() {
    for (;;) {
      auto fd = accept_until(listener.get(), Clock::now());
      if (!fd.ok()) {
        std::lock_guard lock(mu);
        broken = fd.status();
        arrived_cv.notify_all();
        return;
      }
      if (!fd->valid()) return;
      Pending p;
      p.fd = std::move(*fd);
      p.peer = peer_address(p.fd.get());
      if (pending.size() >= kMaxPending) {
        refuse_logged(p, std::to_string(pending.size()) + " connections are in their handshake already");
        continue;
      }
      p.deadline = Clock::now() + auth_wait;
      if (tls != nullptr) {
        // TLS first; the challenge follows inside it.
        if (Status s = start_tls(p.fd, tls, /*server=*/true); !s.ok()) {
          refuse_logged(p, s.message());
          continue;
        }
        p.tls_done = false;
      } else if (!challenge(p)) {
        continue;
      }
      pending.push_back(std::move(p));
    }
  }

  void run() {
    std::vector<pollfd> fds;
    while (!stop) {
      fds.clear();
      fds.push_back({wake[0], POLLIN, 0});
      fds.push_back({listener.get(), POLLIN, 0});
      auto next = Clock::now() + milliseconds(1000);
      for (auto& p : pending) {
        const short ev = !p.tls_done ? p.tls_events : p.fd.events(true, p.out_done < p.out.size());
        fds.push_back({p.fd.get(), ev, 0});
        next = std::min(next, p.deadline);
        if (p.fd.pending()) next = Clock::now();
      }
      const auto left = std::chrono::duration_cast<milliseconds>(next - Clock::now()).count();
      ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000)));
      if (stop) return;
      size_t i = 2;
      for (auto it = pending.begin(); it != pending.end(); ++i) {
        if (!step(*it, i < fds.size() ? fds[i].revents : short(0))) it = pending.erase(it);
        else ++it;
      }
      if (fds[1].revents) accept_all();
      if (fds[0].revents) {
        char b[64];
        while (::read(wake[0], b, sizeof b) > 0) {
        }
      }
    }
  }

  /// The next hello of `channel` (or a join); an invalid Fd when `deadline` passes first.
  Result<std::pair<Fd, Hello>> next(const std::string& channel, Clock::time_point deadline) {
    std::unique_lock lock(mu);
    for (;;) {
      for (auto it = arrived.begin(); it != arrived.end(); ++it) {
        if (it->hello.kind == kPair && it->hello.channel != channel) continue;
        std::pair<Fd, Hello> out{std::move(it->fd), std::move(it->hello)};
        arrived.erase(it);
        return out;
      }
      if (!broken.ok()) return broken;
      if (arrived_cv.wait_until(lock, deadline) == std::cv_status::timeout) {
        // One more look: a hello may have come with the timeout.
        for (auto it = arrived.begin(); it != arrived.end(); ++it) {
          if (it->hello.kind == kPair && it->hello.channel != channel) continue;
          std::pair<Fd, Hello> out{std::move(it->fd), std::move(it->hello)};
          arrived.erase(it);
          return out;
        }
        return std::pair<Fd, Hello>{};
      }
    }
  }

  int refused_count() {
    std::lock_guard lock(mu);
    return refused;
  }
};

Result<std::shared_ptr<Endpoint>> open_endpoint(Fd listener, const std::string& token, const std::string& id,
                                                const std::string& world_secret) {
  auto secret = secret_of_world(world_secret);
  if (!secret.ok()) return secret.status();
  auto tls = comm_tls();
  if (!tls.ok()) return tls.status();
  auto timeout = comm_timeout_from_env();
  if (!timeout.ok()) return timeout.status();
  auto ep = std::make_shared<Endpoint>();
  ep->tls = *tls;
  ep->token = token;
  ep->id = id;
  ep->secret = std::move(*secret);
  ep->auth_wait = std::min<milliseconds>(kHelloWait, *timeout);
  ep->listener = std::move(listener);
  if (::pipe2(ep->wake, O_NONBLOCK | O_CLOEXEC) != 0)
    return unavailable(std::string("cpu communicator: cannot create a pipe: ") + std::strerror(errno));
  Endpoint* raw = ep.get();
  ep->thread = std::thread([raw] { raw->run(); });
  return ep;
}

// -- Meshes -------------------------------------------------------------------------------

namespace {

std::string missing_ranks(const std::vector<Fd>& links, int self) {
  std::string out;
  for (size_t r = 0; r < links.size(); ++r)
    if (static_cast<int>(r) != self && !links[r].valid()) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

/// Accepts the pair links of ranks above `self` (indices self+1 .. world-1) on `channel`.
Status accept_higher(Endpoint& ep, const std::string& channel, int self, int world,
                     std::vector<Fd>& links, Clock::time_point deadline, milliseconds timeout,
                     const std::string& name) {
  auto waiting = [&] {
    for (int r = self + 1; r < world; ++r)
      if (!links[static_cast<size_t>(r)].valid()) return true;
    return false;
  };
  while (waiting()) {
    auto in = ep.next(channel, deadline);
    if (!in.ok()) return in.status();
    if (!in->first.valid()) {
      std::string missing;
      for (int r = self + 1; r < world; ++r)
        if (!links[static_cast<size_t>(r)].valid()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      return unavailable("rank(s) " + missing + " did not connect to rank " + std::to_string(self) +
                         " of cpu communicator " + name + " within " + seconds_text(timeout) + " s" +
                         (ep.refused_count() ? " (" + std::to_string(ep.refused_count()) + " other connection(s) refused)" : ""));
    }
    auto& [fd, h] = *in;
    const int r = static_cast<int>(h.rank);
    std::string why;
    if (h.kind != kPair) why = "rank " + std::to_string(self) + " expects links now, not a join";
    else if (h.world != static_cast<uint32_t>(world))
      why = "rank " + std::to_string(h.rank) + " has a world of " + std::to_string(h.world) + " ranks, rank " +
            std::to_string(self) + " of " + std::to_string(world);
    else if (r <= self || r >= world)
      why = "rank " + std::to_string(h.rank) + " does not connect to rank " + std::to_string(self);
    else if (links[static_cast<size_t>(r)].valid()) why = "rank " + std::to_string(r) + " connected twice";
    if (!why.empty()) {
      refuse(fd, StatusCode::invalid_argument, why);
      return invalid_argument("cpu communicator " + name + ": refused a link: " + why);
    }
    TROUPE_RETURN_IF_ERROR(send_message(fd, reply_ok(nullptr), deadline, "rank " + std::to_string(r)));
    links[static_cast<size_t>(r)] = std::move(fd);
  }
  return {};
}

/// Connects rank `self` to the ranks `lower` (their listeners in `table`) on `channel`.
Status connect_lower(const std::vector<int>& lower, const std::vector<Address>& table, const std::string& secret,
                     ssl_ctx_st* tls, const std::string& token, const std::string& channel, int self, int world,
                     std::vector<Fd>& links, Clock::time_point deadline) {
  for (int r : lower) {
    const auto& a = table[static_cast<size_t>(r)];
    const std::string who = rank_text(r, a);
    auto fd = connect_to(a.host, a.port, deadline);
    if (!fd.ok())
      return unavailable("rank " + std::to_string(self) + " cannot reach " + who + ": " + fd.status().message());
    if (tls) TROUPE_RETURN_IF_ERROR(tls_handshake(*fd, tls, /*server=*/false, deadline, who));
    TROUPE_RETURN_IF_ERROR(authenticate_to(*fd, secret, deadline, who));
    Hello h;
    h.kind = kPair;
    h.world = static_cast<uint32_t>(world);
    h.rank = static_cast<uint32_t>(self);
    h.token = token;
    h.channel = channel;
    TROUPE_RETURN_IF_ERROR(send_message(*fd, encode(h), deadline, who));
    TROUPE_RETURN_IF_ERROR(read_reply(*fd, deadline, who, "rank " + std::to_string(self), nullptr));
    links[static_cast<size_t>(r)] = std::move(*fd);
  }
  return {};
}

}  // namespace

Result<Mesh> join_world(const std::string& id, const TcpId& where, int me, int W, milliseconds timeout,
                        const std::string& world_secret) {
  const auto deadline = Clock::now() + timeout;
  const std::string t = seconds_text(timeout);
  std::shared_ptr<Endpoint> ep;
  std::vector<Address> table(static_cast<size_t>(W));
  std::vector<Fd> links(static_cast<size_t>(W));
  table[0] = {where.host, where.port};
  const std::string rank0 = rank_text(0, table[0]);

  if (me == 0) {
    auto l = take_listener(where.token);
    if (!l.ok())
      return invalid_argument("cpu communicator " + id + ": rank 0 must run in the process that made the id "
                              "(Platform::make_communicator_id with a communicator_host): " + l.status().message());
    ep = std::move(l->endpoint);
    Status failed;
    while (failed.ok() && !missing_ranks(links, 0).empty()) {
      auto in = ep->next("", deadline);
      if (!in.ok()) {
        failed = in.status();
        break;
      }
      if (!in->first.valid()) {
        failed = unavailable("rank(s) " + missing_ranks(links, 0) + " did not join cpu communicator " + id +
                             " within " + t + " s" +
                             (ep->refused_count() ? " (" + std::to_string(ep->refused_count()) + " other connection(s) refused)" : ""));
        break;
      }
      auto& [fd, h] = *in;
      const int r = static_cast<int>(h.rank);
      std::string why;
      if (h.kind != kJoin) why = "rank 0 expects ranks to join now, not a link";
      else if (h.world != static_cast<uint32_t>(W))
        why = "rank " + std::to_string(h.rank) + " joined with a world of " + std::to_string(h.world) +
              " ranks, rank 0 has " + std::to_string(W) + ": the ranks disagree on the world size";
      else if (r < 1 || r >= W)
        why = "rank " + std::to_string(h.rank) + " is not a rank of a world of " + std::to_string(W);
      else if (links[static_cast<size_t>(r)].valid()) why = "rank " + std::to_string(r) + " joined twice";
      else if (h.host.empty() || h.port == 0 || h.port > 65535)
        why = "rank " + std::to_string(r) + " sent no listener address";
      if (!why.empty()) {
        refuse(fd, StatusCode::invalid_argument, why);
        failed = invalid_argument("cpu communicator " + id + ": refused a rank: " + why);
        break;
      }
      table[static_cast<size_t>(r)] = {h.host, static_cast<uint16_t>(h.port)};
      links[static_cast<size_t>(r)] = std::move(fd);
    }
    if (!failed.ok()) {
      for (auto& fd : links)
        if (fd.valid()) refuse(fd, failed.code(), "rank 0 gave up: " + failed.message());
      return failed;
    }
    for (int r = 1; r < W; ++r)
      TROUPE_RETURN_IF_ERROR(send_message(links[static_cast<size_t>(r)], reply_ok(&table), deadline,
                                               rank_text(r, table[static_cast<size_t>(r)])));
  } else {
    auto secret = secret_of_world(world_secret);
    if (!secret.ok()) return secret.status();
    auto tls_context = comm_tls();
    if (!tls_context.ok()) return tls_context.status();
    ssl_ctx_st* tls = *tls_context;
    auto fd0 = connect_to(where.host, where.port, deadline);
    if (!fd0.ok())
      return unavailable("rank 0 of cpu communicator " + id + " is not reachable within " + t + " s: " +
                         fd0.status().message());
    const std::string self = "rank " + std::to_string(me);
    Status a = tls != nullptr ? tls_handshake(*fd0, tls, /*server=*/false, deadline, rank0) : Status();
    if (a.ok()) a = authenticate_to(*fd0, *secret, deadline, rank0);
    if (!a.ok()) {
      if (a.code() == StatusCode::unavailable && a.message().find("did not answer in time") != std::string::npos)
        return unavailable(rank0 + " of cpu communicator " + id + " did not answer " + self + " within " + t + " s");
      return Status(a.code(), "cpu communicator " + id + ": " + a.message());
    }
    // This rank's listener, on the address through which it reached rank 0.
    auto local = local_host(fd0->get());
    if (!local.ok()) return local.status();
    uint16_t port = 0;
    auto l = listen_on(*local, 0, &port);
    if (!l.ok()) return l.status();
    auto opened = open_endpoint(std::move(*l), where.token, id, *secret);
    if (!opened.ok()) return opened.status();
    ep = std::move(*opened);
    Hello h;
    h.kind = kJoin;
    h.world = static_cast<uint32_t>(W);
    h.rank = static_cast<uint32_t>(me);
    h.token = where.token;
    h.host = *local;
    h.port = port;
    Status s = send_message(*fd0, encode(h), deadline, rank0);
    if (s.ok()) s = read_reply(*fd0, deadline, rank0, self, &table);
    if (!s.ok()) {
      if (s.code() == StatusCode::unavailable && s.message().find("did not answer in time") != std::string::npos)
        return unavailable(rank0 + " of cpu communicator " + id + " did not answer " + self + " within " + t +
                           " s (it never came, or another rank is missing)");
      return Status(s.code(), "cpu communicator " + id + ": " + s.message());
    }
    if (table.size() != static_cast<size_t>(W))
      return invalid_argument("cpu communicator " + id + ": rank 0 sent a table of " + std::to_string(table.size()) +
                              " ranks for a world of " + std::to_string(W));
    links[0] = std::move(*fd0);
    std::vector<int> lower;
    for (int r = 1; r < me; ++r) lower.push_back(r);
    s = connect_lower(lower, table, ep->secret, ep->tls, where.token, "", me, W, links, deadline);
    if (!s.ok()) return Status(s.code(), "cpu communicator " + id + ": " + s.message());
  }
  TROUPE_RETURN_IF_ERROR(accept_higher(*ep, "", me, W, links, deadline, timeout, id));
  return Mesh{std::move(ep), std::move(table), std::move(links)};
}


Result<std::vector<Fd>> join_group(Endpoint& ep, const std::vector<Address>& table, const std::string& channel,
                                   int index, milliseconds timeout, const std::string& name) {
  const int n = static_cast<int>(table.size());
  std::vector<Fd> links(static_cast<size_t>(n));
  const auto deadline = Clock::now() + timeout;
  std::vector<int> lower;
  for (int i = 0; i < index; ++i) lower.push_back(i);
  TROUPE_RETURN_IF_ERROR(connect_lower(lower, table, ep.secret, ep.tls, ep.token, channel, index, n, links, deadline));
  TROUPE_RETURN_IF_ERROR(accept_higher(ep, channel, index, n, links, deadline, timeout, name));
  return links;
}

}  // namespace tcp
}  // namespace troupe::cpu
