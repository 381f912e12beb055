// The RESTinio traits of `troupe serve`'s HTTP server: single-threaded (one asio
// thread), the socket of guarded_socket.hpp, a listener that hears each
// connection's end (for DisconnectWatch), and a connection count kept by our
// own acceptor (http_listener.hpp) instead of RESTinio's limiter: each RESTinio
// connection holds a ConnectionSlot from its creation to its end.
#pragma once

#include <restinio/all.hpp>

#include <cstddef>
#include <memory>

#include "apps/serve/guarded_socket.hpp"
#include "apps/serve/server_context.hpp"

namespace troupe::apps::serve {

// RESTinio reports each connection's end here (on the HTTP thread: single-threaded traits).
struct ConnectionListener {
  ServerContext* ctx = nullptr;
  void state_changed(const restinio::connection_state::notice_t& notice) noexcept;
};

/// The connections open now; shared by the listener and every slot.
struct ConnectionCount {
  size_t open = 0;
};

/// One open connection's place under --max-connections (RESTinio's lifetime monitor).
class ConnectionSlot {
 public:
  explicit ConnectionSlot(std::shared_ptr<ConnectionCount> count) : count_(std::move(count)) { ++count_->open; }
  ~ConnectionSlot() {
    if (count_) --count_->open;
  }
  ConnectionSlot(ConnectionSlot&& o) noexcept : count_(std::move(o.count_)) {}
  ConnectionSlot& operator=(ConnectionSlot&& o) noexcept {
    if (this != &o) {
      if (count_) --count_->open;
      count_ = std::move(o.count_);
    }
    return *this;
  }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;

 private:
  std::shared_ptr<ConnectionCount> count_;
};

struct Traits : restinio::default_single_thread_traits_t {
  using connection_state_listener_t = ConnectionListener;
  using stream_socket_t = GuardedSocket;
};

}  // namespace troupe::apps::serve

namespace restinio {
// Our acceptor counts connections; RESTinio's limiter is never built (its acceptor is not used).
template <>
struct connection_count_limit_types<troupe::apps::serve::Traits> {
  using limiter_t = connection_count_limits::noop_connection_count_limiter_t;
  using lifetime_monitor_t = troupe::apps::serve::ConnectionSlot;
};
}  // namespace restinio
