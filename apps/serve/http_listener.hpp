// The HTTP server's front door, in place of RESTinio's http_server_t and its
// acceptor (restinio/impl/acceptor.hpp), which stops accepting for good at the
// first failed accept (its completion handler ignores the error and never
// re-arms: with the descriptors exhausted once, the server never accepted
// again). RESTinio is a system header library, so it is not patched: this
// listener builds the same connection settings and factory http_server_t
// builds and hands it each accepted socket, and owns the accept loop:
//
// - A failed accept is logged (once a second per error) and re-armed: at once,
//   or after 20 ms when the process is out of descriptors (EMFILE/ENFILE) or
//   memory. Out of descriptors, a spare one is given up to accept and answer the
//   waiting connections with a 503 (so they are not left hanging), then taken
//   back.
// - At most `max_connections` connections are open (--max-connections; by
//   default derived from RLIMIT_NOFILE, whose soft limit is raised to the hard
//   one at start, leaving room for the engine's own descriptors). A connection
//   past the cap gets one of `probe_slots` reserved places where only the probe
//   routes are answered (/health, /ping, /metrics, /version, read within 2 s, the
//   answer the server gives anywhere, then the close); anything else there gets
//   503 "too many connections" naming the limit. When the reserved places are
//   full, the oldest that has sent nothing yet gives its place to the newcomer
//   (an idle connection cannot keep a health check out), and when none has, the
//   newcomer gets the 503 at once.
// - An answer past the cap ends in a lingering close: the socket is half-closed,
//   then read to its end (at most 1 s and 64 KiB) before it is closed. A plain
//   close with the client's request (or its body) still unread makes the kernel
//   send a reset, and the client loses the 503 it was sent (a broken pipe while it
//   sends, a reset when it reads). At most `probe_slots` linger at once; past that
//   the close is immediate.
#pragma once

#include <restinio/all.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "apps/serve/http_limits.hpp"
#include "apps/serve/http_traits.hpp"
#include "net/refusal_log.hpp"
#include "troupe/status.hpp"

namespace troupe::apps::serve {

struct ListenerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8000;
  size_t max_connections = 1024;
  size_t probe_slots = 32;
  RequestLimits limits;
};

/// A whole answer written past the cap (always with `Connection: close`).
struct PlainAnswer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
/// The answer to a probe route (method, path without the query), or nullopt for any other.
using ProbeAnswers = std::function<std::optional<PlainAnswer>(std::string_view method, std::string_view path)>;

struct ListenerStats {
  size_t open = 0;                 // connections under the cap
  size_t max_connections = 0;
  uint64_t over_limit = 0;         // connections that came past the cap
  uint64_t probes_answered = 0;    // of those, probe routes answered
  uint64_t accept_errors = 0;      // failed accepts (each re-armed)
  uint64_t shed = 0;               // connections answered 503 while out of descriptors
  uint64_t refused_413 = 0, refused_431 = 0, refused_400 = 0;  // requests refused by a limit
};

/// The descriptor budget at start: RLIMIT_NOFILE after raising the soft limit to the hard
/// one (logged when it rose), and the default --max-connections it leaves: the soft limit
/// less max(256, a quarter) for the engine, nodes and files, at most 65536.
struct DescriptorBudget {
  uint64_t soft = 0;
  uint64_t hard = 0;
  size_t default_max_connections = 0;
};
DescriptorBudget raise_descriptor_limit();
/// invalid_argument naming both when `max_connections` (plus the reserved places, as many
/// lingering closes, and 64 for the rest of the process) does not fit under the soft limit.
Status check_max_connections(size_t max_connections, size_t probe_slots, const DescriptorBudget& budget);

class HttpListener {
 public:
  HttpListener(asio::io_context& io, ListenerOptions options, restinio::server_settings_t<Traits> settings,
               ProbeAnswers answers);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  /// Binds and listens, then accepts. On the server's asio thread.
  Status open();
  /// Stops accepting (open connections stay). On the server's asio thread.
  void close();
  ListenerStats stats() const;
  const std::shared_ptr<ConnectionRegistry>& registry() const { return registry_; }

 private:
  struct Probe;
  struct Lingering;
  void accept();
  void on_accepted(const asio::error_code& ec, asio::ip::tcp::socket socket);
  void start_connection(asio::ip::tcp::socket socket);
  void past_the_cap(asio::ip::tcp::socket socket);
  void read_probe(const std::shared_ptr<Probe>& p);
  void answer_probe(const std::shared_ptr<Probe>& p);
  void finish_probe(const std::shared_ptr<Probe>& p, std::string response);
  void linger_close(asio::ip::tcp::socket socket);
  void read_to_end(const std::shared_ptr<Lingering>& l);
  void shed_waiting();
  std::string too_many() const;

  asio::io_context& io_;
  ListenerOptions options_;
  ProbeAnswers answers_;
  std::shared_ptr<typename Traits::timer_manager_t> timers_;
  std::shared_ptr<restinio::impl::connection_settings_t<Traits>> connection_settings_;
  std::shared_ptr<restinio::impl::connection_factory_t<Traits>> factory_;
  std::shared_ptr<ConnectionCount> count_ = std::make_shared<ConnectionCount>();
  std::shared_ptr<ConnectionRegistry> registry_ = std::make_shared<ConnectionRegistry>();
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  int spare_fd_ = -1;  // given up to accept when out of descriptors
  std::list<std::shared_ptr<Probe>> probes_;
  std::list<std::shared_ptr<Lingering>> lingering_;
  ListenerStats stats_;
  net::RefusalLog log_{"HTTP server"};
  bool closed_ = false;
};

}  // namespace troupe::apps::serve
