#include "actors/gate_actor.hpp"

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/multiplexer.hpp>

#include <atomic>
#include <chrono>

#include "actors/drop_unexpected.hpp"
#include "actors/status_error.hpp"
#include "net/handshake.hpp"
#include "net/link_guard.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct GateState {
  std::string secret;
  std::string what;            // "node", "stat logger": for log lines
  net::Challenges challenges;  // issued and not yet used
  static inline const char* name = "troupe.gate";
};

template <class Handle>
typename gate_actor<Handle>::behavior_type gate_behavior(
    typename gate_actor<Handle>::template stateful_pointer<GateState> self, Handle guarded, std::string secret,
    std::string what) {
  drop_unexpected_messages(self);
  self->state.secret = std::move(secret);
  self->state.what = std::move(what);
  return {
      [=](challenge_atom) -> caf::result<std::string> {
        auto& st = self->state;
        auto nonce = st.challenges.issue();
        if (!nonce.ok()) {
          TROUPE_LOG_ERROR("{}: no challenge: {}", st.what, nonce.status().message());
          return to_error(nonce.status());
        }
        return std::move(*nonce);
      },
      [=](hello_atom, const std::string& nonce, const std::string& proof) -> caf::result<Handle> {
        auto& st = self->state;
        const auto sender = self->current_sender();
        const std::string peer = sender ? caf::to_string(sender->node()) : std::string("an anonymous peer");
        switch (st.challenges.redeem(nonce, proof, st.secret)) {
          case net::Challenges::Verdict::unknown_nonce:
            TROUPE_LOG_WARNING("{} refused a peer ({}): unknown or already used challenge", st.what, peer);
            return to_error(invalid_argument("the " + st.what + " refused the connection: unknown or used challenge"));
          case net::Challenges::Verdict::wrong_proof:
            TROUPE_LOG_WARNING("{} refused a peer ({}): wrong secret", st.what, peer);
            return to_error(invalid_argument("the " + st.what + " refused the connection: wrong secret"));
          case net::Challenges::Verdict::accepted:
            break;
        }
        TROUPE_LOG_INFO("{} accepted a peer ({})", st.what, peer);
        return guarded;
      },
  };
}

// CAF listens on no port: a link that passed the guard reaches CAF's BASP broker as one
// end of a Unix socket pair, made a connection ("scribe") of the middleman's multiplexer.
// The broker takes a published actor's side with (publish_atom, scribe, port, actor,
// interface) and the dialing side with (connect_atom, scribe, port): the messages its
// middleman actor sends it for a doorman's or a dialed TCP connection (CAF 0.17.6,
// basp_broker.cpp). The "port" only names the published actor in the BASP handshake.
caf::actor basp_broker(caf::actor_system& system) {
  return system.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

caf::io::scribe_ptr adopt_scribe(caf::actor_system& system, net::Socket inner) {
  return system.middleman().backend().new_scribe(inner.release());
}

// What the BASP handshake names a gate by (any number no TCP doorman of this process uses:
// there are none).
uint16_t next_published_port() {
  static std::atomic<uint16_t> next{1};
  return next++;
}

template <class Handle>
Result<Handle> connect_gate(caf::actor_system& system, const std::string& host, uint16_t port,
                            const net::LinkAuth& auth, std::chrono::milliseconds timeout, const std::string& what) {
  const std::string& secret = auth.secret;
  const std::string where = what + " " + host + ":" + std::to_string(port);
  if (!system.has_middleman()) return not_supported("the actor system has no middleman (configure_actor_system)");
  caf::scoped_actor self{system};
  Result<Handle> out = unavailable("cannot reach the " + where + ": no answer");
  caf::strong_actor_ptr remote;
  // CAF 0.17.6's BASP broker opens an outgoing connection with last_seen at the
  // clock's epoch (basp_broker.cpp, connect_atom: `this->ctx[hdl]`), so a
  // heartbeat tick that falls before the server's handshake arrives drops it at
  // once with connection_timeout. That race, not the peer, is retried.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int attempt = 1;; ++attempt) {
    // Every connection passes the link guard's handshake first (link_guard.hpp); CAF
    // takes the inner end of the authenticated link.
    auto link = net::dial_link(host, port, auth, what, timeout);
    if (!link.ok()) return link.status();
    caf::error failed;
    self->request(basp_broker(system), timeout, caf::connect_atom::value, adopt_scribe(system, std::move(*link)),
                  port)
        .receive(
            [&](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>&) { remote = std::move(ptr); },
            [&](caf::error& err) { failed = std::move(err); });
    if (remote) break;
    out = to_status(failed, "cannot reach the " + where);
    if (failed != caf::sec::connection_timeout || attempt >= 5 || std::chrono::steady_clock::now() >= deadline)
      return out;
    TROUPE_LOG_DEBUG("{}: the connection timed out during its handshake; trying again", where);
  }
  auto gate = caf::actor_cast<gate_actor<Handle>>(remote);
  std::string nonce;
  self->request(gate, timeout, challenge_atom_v)
      .receive([&](std::string& n) { nonce = std::move(n); },
               [&](caf::error& err) { out = to_status(err, "the " + where + " did not answer its challenge"); });
  if (nonce.empty()) return out;
  self->request(gate, timeout, hello_atom_v, nonce, gate_proof(secret, nonce))
      .receive([&](Handle& h) { out = std::move(h); },
               [&](caf::error& err) { out = to_status(err, where); });
  if (!out) TROUPE_LOG_ERROR("{}", out.status().message());
  return out;
}

template <class Handle>
Result<std::unique_ptr<net::LinkGuard>> publish_guarded_impl(caf::actor_system& system, const Handle& gate,
                                                             const std::string& host, uint16_t port,
                                                             const net::LinkAuth& auth, const std::string& what) {
  auto limits = net::link_limits_from_env();
  if (!limits.ok()) return limits.status();
  if (!system.has_middleman()) return not_supported("the actor system has no middleman (configure_actor_system)");
  const uint16_t published = next_published_port();
  auto whom = caf::actor_cast<caf::strong_actor_ptr>(gate);
  auto sigs = system.message_types(gate);
  auto basp = basp_broker(system);
  caf::actor_system* sys = &system;  // the guard is destroyed before the actor system
  net::AdoptLink adopt = [sys, basp, whom, sigs, published](net::Socket inner) -> Status {
    caf::anon_send(basp, caf::publish_atom::value, adopt_scribe(*sys, std::move(inner)), published, whom, sigs);
    return {};
  };
  return net::LinkGuard::listen(host, port, std::move(adopt), auth, what, *limits);
}

}  // namespace

Result<std::unique_ptr<net::LinkGuard>> publish_guarded(caf::actor_system& system, const node_gate_actor& gate,
                                                        const std::string& host, uint16_t port,
                                                        const net::LinkAuth& auth) {
  return publish_guarded_impl(system, gate, host, port, auth, "node");
}

Result<std::unique_ptr<net::LinkGuard>> publish_guarded(caf::actor_system& system, const stats_gate_actor& gate,
                                                        const std::string& host, uint16_t port,
                                                        const net::LinkAuth& auth) {
  return publish_guarded_impl(system, gate, host, port, auth, "stat logger");
}

std::string gate_proof(const std::string& secret, const std::string& nonce) { return net::nonce_proof(secret, nonce); }

node_gate_actor spawn_node_gate(caf::actor_system& system, plugin_host_actor guarded, std::string secret) {
  return system.spawn(gate_behavior<plugin_host_actor>, std::move(guarded), std::move(secret), std::string("node"));
}

stats_gate_actor spawn_stats_gate(caf::actor_system& system, stat_logger_actor guarded, std::string secret) {
  return system.spawn(gate_behavior<stat_logger_actor>, std::move(guarded), std::move(secret),
                      std::string("stat logger"));
}

Result<plugin_host_actor> connect_node(caf::actor_system& system, const std::string& host, uint16_t port,
                                       const net::LinkAuth& auth, std::chrono::milliseconds timeout) {
  return connect_gate<plugin_host_actor>(system, host, port, auth, timeout, "node");
}

Result<stat_logger_actor> connect_stats(caf::actor_system& system, const std::string& host, uint16_t port,
                                        const net::LinkAuth& auth, std::chrono::milliseconds timeout) {
  return connect_gate<stat_logger_actor>(system, host, port, auth, timeout, "stat logger");
}

Status parse_host_port(const std::string& text, const std::string& what, std::string* host, uint16_t* port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return invalid_argument(what + " wants HOST:PORT, got '" + text + "'");
  const std::string digits = text.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 5)
    return invalid_argument(what + ": bad port in '" + text + "'");
  const long p = std::stol(digits);
  if (p <= 0 || p > 65535) return invalid_argument(what + ": port out of range in '" + text + "'");
  *host = text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(p);
  return {};
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace troupe::actors
