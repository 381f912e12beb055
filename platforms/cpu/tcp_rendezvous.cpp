#include "platforms/cpu/tcp_rendezvous.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "platforms/cpu/host_communicator.hpp"  // seconds_text
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

Result<std::string> make_tcp_communicator_id(const std::string& host, milliseconds unused_lifetime) {
  if (host.empty()) return invalid_argument("a cpu tcp communicator needs the host rank 0 listens on");
  uint16_t port = 0;
  auto fd = tcp::listen_on(host, 0, &port);
  if (!fd.ok()) return Status(fd.status().code(), "cpu communicator: " + fd.status().message());
  std::random_device rd;
  char token[40];
  std::snprintf(token, sizeof token, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  tcp::PendingListener l;
  l.fd = std::move(*fd);
  l.host = host;
  l.port = port;
  tcp::register_listener(token, std::move(l), unused_lifetime);
  return std::string(kTcpIdPrefix) + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port) + ":" + token;
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
Status read_reply(int fd, Clock::time_point deadline, const std::string& who, const std::string& me,
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

void refuse(int fd, StatusCode code, const std::string& message) {
  // Best effort, briefly: the peer learns why; a peer that does not read gets nothing more.
  (void)send_message(fd, reply_refused(code, message), Clock::now() + milliseconds(500), "the peer");
}

}  // namespace

std::string rank_text(int r, const Address& a) {
  return "rank " + std::to_string(r) + " (" + host_port(a.host, a.port) + ")";
}

// -- Endpoint: a rank's listener and the hellos that came early ------------------------------

struct Endpoint {
  Fd listener;
  std::string token;
  std::string id;
  int refused = 0;  // connections refused for a wrong token or a malformed hello
  struct Waiting {
    Fd fd;
    Hello hello;
  };
  std::vector<Waiting> early;  // pair hellos of groups this rank has not made yet

  /// The next hello of `channel` on the listener (or one that came early); an invalid Fd when
  /// `deadline` passes first. Strangers (wrong token, not a hello) are refused and logged.
  Result<std::pair<Fd, Hello>> next(const std::string& channel, Clock::time_point deadline) {
    for (auto it = early.begin(); it != early.end(); ++it) {
      if (it->hello.channel != channel) continue;
      std::pair<Fd, Hello> out{std::move(it->fd), std::move(it->hello)};
      early.erase(it);
      return out;
    }
    for (;;) {
      auto fd = accept_until(listener.get(), deadline);
      if (!fd.ok()) return fd.status();
      if (!fd->valid()) return std::pair<Fd, Hello>{};
      auto body = receive_message(fd->get(), std::min(deadline, Clock::now() + kHelloWait), "a peer");
      Hello h;
      if (!body.ok() || !decode(std::move(*body), &h)) {
        ++refused;
        const std::string why = body.ok() ? "it is not a troupe cpu communicator hello (or another troupe version)"
                                          : body.status().message();
        TROUPE_LOG_WARNING("cpu communicator {}: refused a connection: {}", id, why);
        if (body.ok()) refuse(fd->get(), StatusCode::invalid_argument, why);
        continue;
      }
      if (h.token != token) {
        ++refused;
        TROUPE_LOG_WARNING("cpu communicator {}: refused rank {}: its communicator token does not match (a stale "
                           "or foreign communicator id)", id, h.rank);
        refuse(fd->get(), StatusCode::invalid_argument,
               "the communicator token does not match (a stale or foreign communicator id)");
        continue;
      }
      if (h.kind == kPair && h.channel != channel) {
        early.push_back({std::move(*fd), std::move(h)});
        continue;
      }
      return std::pair<Fd, Hello>{std::move(*fd), std::move(h)};
    }
  }
};

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
                         (ep.refused ? " (" + std::to_string(ep.refused) + " other connection(s) refused)" : ""));
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
      refuse(fd.get(), StatusCode::invalid_argument, why);
      return invalid_argument("cpu communicator " + name + ": refused a link: " + why);
    }
    TROUPE_RETURN_IF_ERROR(send_message(fd.get(), reply_ok(nullptr), deadline, "rank " + std::to_string(r)));
    links[static_cast<size_t>(r)] = std::move(fd);
  }
  return {};
}

/// Connects rank `self` to the ranks `lower` (their listeners in `table`) on `channel`.
Status connect_lower(const std::vector<int>& lower, const std::vector<Address>& table,
                     const std::string& token, const std::string& channel, int self, int world,
                     std::vector<Fd>& links, Clock::time_point deadline) {
  for (int r : lower) {
    const auto& a = table[static_cast<size_t>(r)];
    const std::string who = rank_text(r, a);
    auto fd = connect_to(a.host, a.port, deadline);
    if (!fd.ok())
      return unavailable("rank " + std::to_string(self) + " cannot reach " + who + ": " + fd.status().message());
    Hello h;
    h.kind = kPair;
    h.world = static_cast<uint32_t>(world);
    h.rank = static_cast<uint32_t>(self);
    h.token = token;
    h.channel = channel;
    TROUPE_RETURN_IF_ERROR(send_message(fd->get(), encode(h), deadline, who));
    TROUPE_RETURN_IF_ERROR(read_reply(fd->get(), deadline, who, "rank " + std::to_string(self), nullptr));
    links[static_cast<size_t>(r)] = std::move(*fd);
  }
  return {};
}

}  // namespace

Result<Mesh> join_world(const std::string& id, const TcpId& where, int me, int W, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string t = seconds_text(timeout);
  auto ep = std::make_shared<Endpoint>();
  ep->token = where.token;
  ep->id = id;
  std::vector<Address> table(static_cast<size_t>(W));
  std::vector<Fd> links(static_cast<size_t>(W));
  table[0] = {where.host, where.port};
  const std::string rank0 = rank_text(0, table[0]);

  if (me == 0) {
    auto l = take_listener(where.token);
    if (!l.ok())
      return invalid_argument("cpu communicator " + id + ": rank 0 must run in the process that made the id "
                              "(Platform::make_communicator_id with a communicator_host): " + l.status().message());
    ep->listener = std::move(l->fd);
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
                             (ep->refused ? " (" + std::to_string(ep->refused) + " other connection(s) refused)" : ""));
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
        refuse(fd.get(), StatusCode::invalid_argument, why);
        failed = invalid_argument("cpu communicator " + id + ": refused a rank: " + why);
        break;
      }
      table[static_cast<size_t>(r)] = {h.host, static_cast<uint16_t>(h.port)};
      links[static_cast<size_t>(r)] = std::move(fd);
    }
    if (!failed.ok()) {
      for (auto& fd : links)
        if (fd.valid()) refuse(fd.get(), failed.code(), "rank 0 gave up: " + failed.message());
      return failed;
    }
    for (int r = 1; r < W; ++r)
      TROUPE_RETURN_IF_ERROR(send_message(links[static_cast<size_t>(r)].get(), reply_ok(&table), deadline,
                                               rank_text(r, table[static_cast<size_t>(r)])));
  } else {
    auto fd0 = connect_to(where.host, where.port, deadline);
    if (!fd0.ok())
      return unavailable("rank 0 of cpu communicator " + id + " is not reachable within " + t + " s: " +
                         fd0.status().message());
    // This rank's listener, on the address through which it reached rank 0.
    auto local = local_host(fd0->get());
    if (!local.ok()) return local.status();
    uint16_t port = 0;
    auto l = listen_on(*local, 0, &port);
    if (!l.ok()) return l.status();
    ep->listener = std::move(*l);
    Hello h;
    h.kind = kJoin;
    h.world = static_cast<uint32_t>(W);
    h.rank = static_cast<uint32_t>(me);
    h.token = where.token;
    h.host = *local;
    h.port = port;
    const std::string self = "rank " + std::to_string(me);
    Status s = send_message(fd0->get(), encode(h), deadline, rank0);
    if (s.ok()) s = read_reply(fd0->get(), deadline, rank0, self, &table);
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
    s = connect_lower(lower, table, where.token, "", me, W, links, deadline);
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
  TROUPE_RETURN_IF_ERROR(connect_lower(lower, table, ep.token, channel, index, n, links, deadline));
  TROUPE_RETURN_IF_ERROR(accept_higher(ep, channel, index, n, links, deadline, timeout, name));
  return links;
}

}  // namespace tcp
}  // namespace troupe::cpu
