#include "platforms/cpu/tcp_rendezvous.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "net/crypto.hpp"
#include "net/frames.hpp"
#include "net/handshake.hpp"
#include "platforms/cpu/host_communicator.hpp"  // seconds_text, comm_timeout_from_env
#include "platforms/cpu/tcp_trust.hpp"
#include "troupe/log.hpp"

namespace troupe::cpu {

using net::Stream;
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

// -- The registry of rank 0 listeners ------------------------------------------------------

namespace tcp {
namespace {

/// A listener that make_tcp_communicator_id opened (and serves: open_endpoint) for rank 0
/// of a world, until rank 0's communicator takes it.
struct PendingListener {
  std::shared_ptr<Endpoint> endpoint;
  std::string host;  // as written in the id
  uint16_t port = 0;
};

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

/// Keeps `listener` under `token` for `lifetime`; an entry not taken by then is closed the
/// next time the registry is used.
void register_listener(const std::string& token, PendingListener listener, milliseconds lifetime) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.sweep();
  r.entries[token] = Registry::Entry{std::move(listener), Clock::now() + lifetime};
}

/// Takes the listener kept under `token`; not_found when this process holds none (made in
/// another process, taken already, or expired: the message tells which it can).
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

}  // namespace
}  // namespace tcp

Result<std::string> make_tcp_communicator_id(const std::string& host, milliseconds unused_lifetime,
                                             const std::string& secret) {
  if (host.empty()) return invalid_argument("a cpu tcp communicator needs the host rank 0 listens on");
  uint16_t port = 0;
  auto listener = net::listen_on(host, 0, &port);
  if (!listener.ok()) return Status(listener.status().code(), "cpu communicator: " + listener.status().message());
  // The token names the world (a stale id is told apart); it is no credential: every
  // connection proves the cluster secret (tcp_trust.hpp).
  auto token = crypto::random_hex(16);
  if (!token.ok()) return unavailable("cpu communicator: no random bytes for an id");
  const std::string id = std::string(kTcpIdPrefix) + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                         ":" + std::to_string(port) + ":" + *token;
  auto ep = tcp::open_endpoint(std::move(*listener), *token, id, secret);
  if (!ep.ok()) return ep.status();
  tcp::PendingListener l;
  l.endpoint = std::move(*ep);
  l.host = host;
  l.port = port;
  tcp::register_listener(*token, std::move(l), unused_lifetime);
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
// their handshake, and authenticated links not yet taken; and on a rendezvous answer (a
// table of 256 ranks fits many times over).
constexpr uint32_t kMaxHelloBytes = 64 << 10;
constexpr size_t kMaxPending = 64;
constexpr size_t kMaxArrived = 1024;
constexpr uint32_t kMaxMessageBytes = 1 << 20;

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
  net::FieldWriter w;
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
  net::FieldReader r(std::move(bytes));
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
  net::FieldWriter w;
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
  net::FieldWriter w;
  w.u64(kMagic);
  w.u32(static_cast<uint32_t>(code));
  w.str(message);
  return w.bytes();
}

/// The answer of the rank `who` to a hello: ok (with the table when `table` is given) or
/// its refusal as a Status.
Status read_reply(Stream& s, Clock::time_point deadline, const std::string& who, const std::string& me,
                  std::vector<Address>* table) {
  auto body = net::receive_frame(s, kMaxMessageBytes, deadline, who, "rendezvous message");
  if (!body.ok()) return body.status();
  net::FieldReader r(std::move(*body));
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

void refuse(Stream& s, StatusCode code, const std::string& message) {
  // Best effort, briefly: the peer learns why; a peer that does not read gets nothing more.
  (void)net::send_frame(s, reply_refused(code, message), Clock::now() + milliseconds(500), "the peer");
}

/// A connection to a rank's listener: plain, or the client side of TLS (not yet shaken).
Result<Stream> open_link(net::Socket socket, const std::shared_ptr<const net::TlsContext>& tls) {
  if (tls == nullptr) return Stream(std::move(socket));
  // No host-name check: a rank's listener may be any address of its node.
  return Stream::tls(std::move(socket), *tls, /*server=*/false, "");
}

}  // namespace

std::string rank_text(int r, const Address& a) {
  return "rank " + std::to_string(r) + " (" + net::host_port(a.host, a.port) + ")";
}

// -- Endpoint: a rank's listener, served by a thread of its own ----------------------------

// Every connection is accepted at once and must pass the handshake (TLS, then the secret;
// net::ServerHandshake) and send its hello within the auth wait, or it is closed and
// logged: nothing sits unread on a listener, whether or not a rank is waiting for links
// right now.
struct Endpoint {
  std::string token;
  std::string id;
  std::string secret;
  std::shared_ptr<const net::TlsContext> tls;  // TLS on every connection (tcp_trust.hpp), or none
  milliseconds auth_wait{10'000};

  std::mutex mu;
  std::condition_variable arrived_cv;
  struct Arrived {
    Stream link;
    Hello hello;
  };
  std::deque<Arrived> arrived;  // authenticated hellos not yet taken, oldest first
  int refused = 0;              // connections refused (no proof, a malformed hello, a wrong token)
  Status broken;                // the listener failed

  net::Socket listener;
  net::Socket wake_read, wake_write;
  std::atomic<bool> stop{false};
  std::thread thread;

  /// A connection in its handshake, then its hello.
  struct Pending {
    net::ServerHandshake hs;
    std::string peer;
    Clock::time_point deadline;
    bool authenticated = false;  // the verdict went out: the hello follows
    std::string in;              // the hello's 4-byte length, then the hello
    uint32_t hello_bytes = 0;    // its length, once its prefix arrived
  };
  std::list<Pending> pending;

  ~Endpoint() {
    stop = true;
    if (wake_write.valid()) (void)::write(wake_write.get(), "x", 1);
    if (thread.joinable()) thread.join();
  }

  void refuse_logged(const std::string& peer, const std::string& why) {
    TROUPE_LOG_WARNING("cpu communicator {}: refused a connection from {}: {}", id, peer, why);
    std::lock_guard lock(mu);
    ++refused;
  }

  /// Progress of one connection; false once it is closed or handed over.
  bool step(Pending& p, short revents) {
    if (!p.authenticated) {
      if (Clock::now() >= p.deadline) {
        refuse_logged(p.peer, p.hs.tls_done() ? "it did not pass the handshake within " + seconds_text(auth_wait) + " s"
                                              : "it did not finish the TLS handshake within " +
                                                    seconds_text(auth_wait) +
                                                    " s (a peer without TLS waits for a challenge that never comes)");
        return false;
      }
      switch (p.hs.step(revents)) {
        case net::ServerHandshake::State::running:
          return true;
        case net::ServerHandshake::State::refused:
        case net::ServerHandshake::State::left:
          refuse_logged(p.peer, p.hs.why());
          return false;
        case net::ServerHandshake::State::accepted:
          p.authenticated = true;
          revents = POLLIN;  // the hello may be there already
          break;
      }
    }
    if (Clock::now() >= p.deadline) {
      refuse_logged(p.peer, "it sent no hello within " + seconds_text(auth_wait) + " s");
      return false;
    }
    return read_hello(p, revents);
  }

  /// Reads the hello (its length, then the hello; never more) and hands the link over once
  /// it is whole and names this world; false once the connection is closed or handed over.
  bool read_hello(Pending& p, short revents) {
    Stream& s = p.hs.stream();
    if (!(revents & (POLLIN | POLLHUP | POLLERR)) && !s.pending()) return true;
    const size_t want = p.in.size() < 4 ? 4 - p.in.size() : 4 + p.hello_bytes - p.in.size();
    std::string buf(std::min<size_t>(want, 64 << 10), '\0');
    size_t got = 0;
    const auto r = s.read(buf.data(), buf.size(), &got);
    if (r == Stream::Io::again) return true;
    if (r == Stream::Io::closed) {
      refuse_logged(p.peer, "it closed the connection during the handshake");
      return false;
    }
    if (r == Stream::Io::failed) {
      refuse_logged(p.peer, "it reset the connection during the handshake (" + s.error() + ")");
      return false;
    }
    p.in.append(buf.data(), got);
    if (p.in.size() == 4) {
      p.hello_bytes = net::FieldReader(p.in).u32();
      if (p.hello_bytes > kMaxHelloBytes) {
        refuse_logged(p.peer, "a hello of " + std::to_string(p.hello_bytes) + " bytes (at most " +
                                  std::to_string(kMaxHelloBytes) + ")");
        return false;
      }
    }
    if (p.in.size() < 4 + size_t{p.hello_bytes}) return true;
    Hello h;
    if (!decode(p.in.substr(4), &h)) {
      refuse(s, StatusCode::invalid_argument, "not a troupe cpu communicator hello (or another version)");
      refuse_logged(p.peer, "it is not a troupe cpu communicator hello (or another troupe version)");
      return false;
    }
    if (h.token != token) {
      refuse(s, StatusCode::invalid_argument,
             "the communicator token does not match (a stale or foreign communicator id)");
      TROUPE_LOG_WARNING("cpu communicator {}: refused rank {}: its communicator token does not match (a stale "
                         "or foreign communicator id; from {})", id, h.rank, p.peer);
      std::lock_guard lock(mu);
      ++refused;
      return false;
    }
    {
      std::lock_guard lock(mu);
      if (arrived.size() >= kMaxArrived) {
        ++refused;
        TROUPE_LOG_WARNING("cpu communicator {}: refused rank {} ({}): {} links wait already", id, h.rank, p.peer,
                           arrived.size());
        return false;
      }
      arrived.push_back({std::move(s), std::move(h)});
    }
    arrived_cv.notify_all();
    return false;
  }

  void accept_all() {
    for (;;) {
      auto socket = net::accept_next(listener.get());
      if (!socket.ok()) {
        std::lock_guard lock(mu);
        broken = socket.status();
        arrived_cv.notify_all();
        return;
      }
      if (!socket->valid()) return;
      const std::string peer = net::peer_address(socket->get());
      if (pending.size() >= kMaxPending) {
        refuse_logged(peer, std::to_string(pending.size()) + " connections are in their handshake already");
        continue;
      }
      Stream s;
      if (tls != nullptr) {
        // TLS first; the challenge follows inside it.
        auto t = Stream::tls(std::move(*socket), *tls, /*server=*/true, "");
        if (!t.ok()) {
          refuse_logged(peer, t.status().message());
          continue;
        }
        s = std::move(*t);
      } else {
        s = Stream(std::move(*socket));
      }
      pending.push_back(Pending{net::ServerHandshake(std::move(s), comm_handshake(), secret), peer,
                                Clock::now() + auth_wait, false, "", 0});
      if (!step(pending.back(), POLLOUT)) pending.pop_back();
    }
  }

  void run() {
    std::vector<pollfd> fds;
    while (!stop) {
      fds.clear();
      fds.push_back({wake_read.get(), POLLIN, 0});
      fds.push_back({listener.get(), POLLIN, 0});
      auto next = Clock::now() + milliseconds(1000);
      for (auto& p : pending) {
        fds.push_back({p.hs.fd(), p.authenticated ? p.hs.stream().events(true, false) : p.hs.events(), 0});
        next = std::min(next, p.deadline);
        if (p.hs.ready()) next = Clock::now();
      }
      ::poll(fds.data(), fds.size(), net::poll_ms(next));
      if (stop) return;
      size_t i = 2;
      for (auto it = pending.begin(); it != pending.end(); ++i) {
        if (!step(*it, i < fds.size() ? fds[i].revents : short(0))) it = pending.erase(it);
        else ++it;
      }
      if (fds[1].revents) accept_all();
      if (fds[0].revents) {
        char b[64];
        while (::read(wake_read.get(), b, sizeof b) > 0) {
        }
      }
    }
  }

  /// Takes the first hello of `channel` (or a join) that arrived, if any.
  bool take(const std::string& channel, std::pair<Stream, Hello>* out) {
    for (auto it = arrived.begin(); it != arrived.end(); ++it) {
      if (it->hello.kind == kPair && it->hello.channel != channel) continue;
      *out = std::pair<Stream, Hello>(std::move(it->link), std::move(it->hello));
      arrived.erase(it);
      return true;
    }
    return false;
  }

  /// The next hello of `channel` (or a join); a closed Stream when `deadline` passes first.
  Result<std::pair<Stream, Hello>> next(const std::string& channel, Clock::time_point deadline) {
    std::unique_lock lock(mu);
    std::pair<Stream, Hello> out;
    for (;;) {
      if (take(channel, &out)) return out;
      if (!broken.ok()) return broken;
      if (arrived_cv.wait_until(lock, deadline) == std::cv_status::timeout) {
        take(channel, &out);  // one more look: a hello may have come with the timeout
        return out;
      }
    }
  }

  int refused_count() {
    std::lock_guard lock(mu);
    return refused;
  }
};

Result<std::shared_ptr<Endpoint>> open_endpoint(net::Socket listener, const std::string& token,
                                                const std::string& id, const std::string& world_secret) {
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
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0)
    return unavailable(std::string("cpu communicator: cannot create a pipe: ") + std::strerror(errno));
  ep->wake_read = net::Socket(wake[0]);
  ep->wake_write = net::Socket(wake[1]);
  Endpoint* raw = ep.get();
  ep->thread = std::thread([raw] { raw->run(); });
  return ep;
}

// -- Meshes -------------------------------------------------------------------------------

namespace {

std::string missing_ranks(const std::vector<Stream>& links, int self, int from = 0) {
  std::string out;
  for (size_t r = static_cast<size_t>(from); r < links.size(); ++r)
    if (static_cast<int>(r) != self && !links[r].is_open()) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string refused_text(Endpoint& ep) {
  const int n = ep.refused_count();
  return n ? " (" + std::to_string(n) + " other connection(s) refused)" : "";
}

/// Accepts the pair links of ranks above `self` (indices self+1 .. world-1) on `channel`.
Status accept_higher(Endpoint& ep, const std::string& channel, int self, int world, std::vector<Stream>& links,
                     Clock::time_point deadline, milliseconds timeout, const std::string& name) {
  while (!missing_ranks(links, self, self + 1).empty()) {
    auto in = ep.next(channel, deadline);
    if (!in.ok()) return in.status();
    if (!in->first.is_open())
      return unavailable("rank(s) " + missing_ranks(links, self, self + 1) + " did not connect to rank " +
                         std::to_string(self) + " of cpu communicator " + name + " within " + seconds_text(timeout) +
                         " s" + refused_text(ep));
    auto& [link, h] = *in;
    const int r = static_cast<int>(h.rank);
    std::string why;
    if (h.kind != kPair) why = "rank " + std::to_string(self) + " expects links now, not a join";
    else if (h.world != static_cast<uint32_t>(world))
      why = "rank " + std::to_string(h.rank) + " has a world of " + std::to_string(h.world) + " ranks, rank " +
            std::to_string(self) + " of " + std::to_string(world);
    else if (r <= self || r >= world)
      why = "rank " + std::to_string(h.rank) + " does not connect to rank " + std::to_string(self);
    else if (links[static_cast<size_t>(r)].is_open()) why = "rank " + std::to_string(r) + " connected twice";
    if (!why.empty()) {
      refuse(link, StatusCode::invalid_argument, why);
      return invalid_argument("cpu communicator " + name + ": refused a link: " + why);
    }
    TROUPE_RETURN_IF_ERROR(net::send_frame(link, reply_ok(nullptr), deadline, "rank " + std::to_string(r)));
    links[static_cast<size_t>(r)] = std::move(link);
  }
  return {};
}

/// Connects rank `self` to the ranks `lower` (their listeners in `table`) on `channel`.
Status connect_lower(const std::vector<int>& lower, const std::vector<Address>& table, const Endpoint& ep,
                     const std::string& channel, int self, int world, std::vector<Stream>& links,
                     Clock::time_point deadline) {
  for (int r : lower) {
    const auto& a = table[static_cast<size_t>(r)];
    const std::string who = rank_text(r, a);
    auto socket = net::connect_to(a.host, a.port, deadline, net::Retry::until_deadline);
    if (!socket.ok())
      return unavailable("rank " + std::to_string(self) + " cannot reach " + who + ": " + socket.status().message());
    auto link = open_link(std::move(*socket), ep.tls);
    if (!link.ok()) return link.status();
    TROUPE_RETURN_IF_ERROR(net::client_handshake(*link, comm_handshake(), ep.secret, deadline, who));
    Hello h;
    h.kind = kPair;
    h.world = static_cast<uint32_t>(world);
    h.rank = static_cast<uint32_t>(self);
    h.token = ep.token;
    h.channel = channel;
    TROUPE_RETURN_IF_ERROR(net::send_frame(*link, encode(h), deadline, who));
    TROUPE_RETURN_IF_ERROR(read_reply(*link, deadline, who, "rank " + std::to_string(self), nullptr));
    links[static_cast<size_t>(r)] = std::move(*link);
  }
  return {};
}

/// Rank 0's side of a world's rendezvous: every other rank joins through `ep`; once all
/// have, each gets the table of listeners. A refusal or a missing rank ends it for all.
Status gather_world(Endpoint& ep, const std::string& id, int W, std::vector<Address>& table,
                    std::vector<Stream>& links, Clock::time_point deadline, const std::string& t) {
  Status failed;
  while (failed.ok() && !missing_ranks(links, 0).empty()) {
    auto in = ep.next("", deadline);
    if (!in.ok()) {
      failed = in.status();
      break;
    }
    if (!in->first.is_open()) {
      failed = unavailable("rank(s) " + missing_ranks(links, 0) + " did not join cpu communicator " + id +
                           " within " + t + " s" + refused_text(ep));
      break;
    }
    auto& [link, h] = *in;
    const int r = static_cast<int>(h.rank);
    std::string why;
    if (h.kind != kJoin) why = "rank 0 expects ranks to join now, not a link";
    else if (h.world != static_cast<uint32_t>(W))
      why = "rank " + std::to_string(h.rank) + " joined with a world of " + std::to_string(h.world) +
            " ranks, rank 0 has " + std::to_string(W) + ": the ranks disagree on the world size";
    else if (r < 1 || r >= W)
      why = "rank " + std::to_string(h.rank) + " is not a rank of a world of " + std::to_string(W);
    else if (links[static_cast<size_t>(r)].is_open()) why = "rank " + std::to_string(r) + " joined twice";
    else if (h.host.empty() || h.port == 0 || h.port > 65535)
      why = "rank " + std::to_string(r) + " sent no listener address";
    if (!why.empty()) {
      refuse(link, StatusCode::invalid_argument, why);
      failed = invalid_argument("cpu communicator " + id + ": refused a rank: " + why);
      break;
    }
    table[static_cast<size_t>(r)] = {h.host, static_cast<uint16_t>(h.port)};
    links[static_cast<size_t>(r)] = std::move(link);
  }
  if (!failed.ok()) {
    for (auto& link : links)
      if (link.is_open()) refuse(link, failed.code(), "rank 0 gave up: " + failed.message());
    return failed;
  }
  for (int r = 1; r < W; ++r)
    TROUPE_RETURN_IF_ERROR(net::send_frame(links[static_cast<size_t>(r)], reply_ok(&table), deadline,
                                           rank_text(r, table[static_cast<size_t>(r)])));
  return {};
}

/// A rank above 0 joins the world through rank 0 at `table[0]`: proves the secret, opens its
/// own listener on the address through which it reached rank 0, sends its hello and takes
/// the table of listeners; then links to every lower rank but 0.
Result<std::shared_ptr<Endpoint>> join_rank0(const std::string& id, const TcpId& where, int me, int W,
                                             const std::string& world_secret, std::vector<Address>& table,
                                             std::vector<Stream>& links, Clock::time_point deadline,
                                             const std::string& t) {
  auto secret = secret_of_world(world_secret);
  if (!secret.ok()) return secret.status();
  auto tls = comm_tls();
  if (!tls.ok()) return tls.status();
  const std::string rank0 = rank_text(0, table[0]);
  const std::string self = "rank " + std::to_string(me);
  auto socket = net::connect_to(where.host, where.port, deadline, net::Retry::until_deadline);
  if (!socket.ok())
    return unavailable("rank 0 of cpu communicator " + id + " is not reachable within " + t + " s: " +
                       socket.status().message());
  auto link0 = open_link(std::move(*socket), *tls);
  if (!link0.ok()) return link0.status();
  // A silent rank 0 is told as such; the rest of what went wrong keeps its own words.
  auto failed = [&](const Status& s, const std::string& more) {
    if (s.code() == StatusCode::unavailable && s.message().find("did not answer in time") != std::string::npos)
      return unavailable(rank0 + " of cpu communicator " + id + " did not answer " + self + " within " + t + " s" +
                         more);
    return Status(s.code(), "cpu communicator " + id + ": " + s.message());
  };
  if (Status a = net::client_handshake(*link0, comm_handshake(), *secret, deadline, rank0); !a.ok())
    return failed(a, "");
  auto local = net::local_host(link0->fd());
  if (!local.ok()) return local.status();
  uint16_t port = 0;
  auto l = net::listen_on(*local, 0, &port);
  if (!l.ok()) return l.status();
  auto ep = open_endpoint(std::move(*l), where.token, id, *secret);
  if (!ep.ok()) return ep.status();
  Hello h;
  h.kind = kJoin;
  h.world = static_cast<uint32_t>(W);
  h.rank = static_cast<uint32_t>(me);
  h.token = where.token;
  h.host = *local;
  h.port = port;
  Status s = net::send_frame(*link0, encode(h), deadline, rank0);
  if (s.ok()) s = read_reply(*link0, deadline, rank0, self, &table);
  if (!s.ok()) return failed(s, " (it never came, or another rank is missing)");
  if (table.size() != static_cast<size_t>(W))
    return invalid_argument("cpu communicator " + id + ": rank 0 sent a table of " + std::to_string(table.size()) +
                            " ranks for a world of " + std::to_string(W));
  links[0] = std::move(*link0);
  std::vector<int> lower;
  for (int r = 1; r < me; ++r) lower.push_back(r);
  s = connect_lower(lower, table, **ep, "", me, W, links, deadline);
  if (!s.ok()) return Status(s.code(), "cpu communicator " + id + ": " + s.message());
  return ep;
}

}  // namespace

Result<Mesh> join_world(const std::string& id, const TcpId& where, int me, int W, milliseconds timeout,
                        const std::string& world_secret) {
  const auto deadline = Clock::now() + timeout;
  const std::string t = seconds_text(timeout);
  std::shared_ptr<Endpoint> ep;
  std::vector<Address> table(static_cast<size_t>(W));
  std::vector<Stream> links(static_cast<size_t>(W));
  table[0] = {where.host, where.port};
  if (me == 0) {
    auto l = take_listener(where.token);
    if (!l.ok())
      return invalid_argument("cpu communicator " + id + ": rank 0 must run in the process that made the id "
                              "(Platform::make_communicator_id with a communicator_host): " + l.status().message());
    ep = std::move(l->endpoint);
    TROUPE_RETURN_IF_ERROR(gather_world(*ep, id, W, table, links, deadline, t));
  } else {
    auto joined = join_rank0(id, where, me, W, world_secret, table, links, deadline, t);
    if (!joined.ok()) return joined.status();
    ep = std::move(*joined);
  }
  TROUPE_RETURN_IF_ERROR(accept_higher(*ep, "", me, W, links, deadline, timeout, id));
  return Mesh{std::move(ep), std::move(table), std::move(links)};
}

Result<std::vector<Stream>> join_group(Endpoint& ep, const std::vector<Address>& table, const std::string& channel,
                                       int index, milliseconds timeout, const std::string& name) {
  const int n = static_cast<int>(table.size());
  std::vector<Stream> links(static_cast<size_t>(n));
  const auto deadline = Clock::now() + timeout;
  std::vector<int> lower;
  for (int i = 0; i < index; ++i) lower.push_back(i);
  TROUPE_RETURN_IF_ERROR(connect_lower(lower, table, ep, channel, index, n, links, deadline));
  TROUPE_RETURN_IF_ERROR(accept_higher(ep, channel, index, n, links, deadline, timeout, name));
  return links;
}

}  // namespace tcp
}  // namespace troupe::cpu
