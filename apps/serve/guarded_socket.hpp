// The HTTP server's socket (its RESTinio traits' stream_socket_t): asio's TCP
// socket with what RESTinio 0.6 lacks in front of its reads and writes. RESTinio
// is a system header library, so nothing in it is edited: its connection calls
// async_read_some, async_write_some, cancel, shutdown and close on this type,
// and ConnectionIo decides.
//
// - Limits (http_limits.hpp): every byte read goes through a RequestLimiter
//   first. A request over a limit never reaches RESTinio: once the requests
//   before it are answered, ConnectionIo writes the refusal itself (413, 431 or
//   400, the OpenAI error envelope, `Connection: close`), half-closes, reads
//   and drops what the client still sends for a moment (so that its unread
//   bytes do not turn the close into a reset that would swallow the answer),
//   and closes. A body over --max-body-bytes is refused from its
//   Content-Length, before one byte of it is read.
// - A half-close is not a departure (RFC 9112 9.6): a client that shuts down
//   its sending side after a request (`nc -N`) still gets its answers. The end
//   of input is held back from RESTinio while requests are in flight and given
//   to it once they are answered, and RESTinio then closes. A client that
//   really left (close(), not shutdown()) sends the same FIN, so one whose
//   answer would be written only at the end (not streamed) is asked: the first
//   bytes of any answer, "HTTP/1.1 ", are written at once (and dropped from the
//   answer when it comes). A closed socket answers them with a reset, which is
//   seen within a poll or two; the connection then closes and its requests are
//   aborted as before. Streamed answers write every step and need no probe.
//
// All of it runs on the server's one asio thread.
#pragma once

#include <restinio/asio_include.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/serve/http_limits.hpp"

namespace troupe::apps::serve {

class GuardedSocket;

/// What every connection of one server shares: the connections by RESTinio's id (for the
/// request handlers, which know only that id), and what the server is told.
class ConnectionRegistry {
 public:
  struct Hooks {
    /// The client half-closed while requests of its connection are in flight: may it be
    /// probed (its answers are not being streamed)?
    std::function<bool(uint64_t connection_id)> may_probe;
    /// A request refused by a limit (status 413, 431 or 400).
    std::function<void(int status)> refused;
  };
  Hooks hooks;

  void add(uint64_t id, std::weak_ptr<class ConnectionIo> io) { by_id_[id] = std::move(io); }
  void remove(uint64_t id) { by_id_.erase(id); }
  std::shared_ptr<ConnectionIo> find(uint64_t id) const;
  /// Requests in flight and writes outstanding over every connection.
  size_t busy() const;

  /// The registry of the server whose asio thread this is (set by that thread), or null.
  static ConnectionRegistry* current();
  static void set_current(ConnectionRegistry* registry);

 private:
  std::unordered_map<uint64_t, std::weak_ptr<ConnectionIo>> by_id_;
};

/// A request handler took a request of connection `id` / wrote its answer's last byte.
void http_request_started(uint64_t connection_id);
void http_request_answered(uint64_t connection_id);

class ConnectionIo : public std::enable_shared_from_this<ConnectionIo> {
 public:
  using ReadHandler = std::function<void(const asio::error_code&, std::size_t)>;

  ConnectionIo(asio::io_context& io, RequestLimits limits, std::shared_ptr<ConnectionRegistry> registry);
  ~ConnectionIo();
  ConnectionIo(const ConnectionIo&) = delete;
  ConnectionIo& operator=(const ConnectionIo&) = delete;

  void set_id(uint64_t id);
  uint64_t id() const { return id_; }

  // -- from GuardedSocket (the socket object RESTinio's connection owns) --
  void bind(GuardedSocket* s) { socket_ = s; }
  void unbind(GuardedSocket* s) {
    if (socket_ == s) socket_ = nullptr;
  }
  void read(asio::mutable_buffer buffer, ReadHandler handler);
  /// Removes from the front of `buffers` what the probe wrote already; the bytes removed.
  size_t drop_probe_prefix(std::vector<asio::const_buffer>* buffers);
  void write_started() { ++writes_; }
  void write_finished();
  /// RESTinio cancels or closes: a held read completes as an aborted one would.
  void cancelled(bool closing);

  // -- from the server --
  void request_started() { ++in_flight_; }
  void request_answered();
  size_t busy() const { return in_flight_ + writes_; }

 private:
  enum class State { open, half_closed, refusing, closed };
  asio::ip::tcp::socket& base();
  void after_read(asio::mutable_buffer buffer, ReadHandler handler, const asio::error_code& ec, size_t n);
  void on_end_of_input(ReadHandler handler);
  void refuse(RequestLimiter::Verdict verdict, const std::string& detail);
  void settle();
  void release(const asio::error_code& ec);
  void probe();
  void watch_for_reset(int round);
  void send_refusal();
  void linger();
  void drain(std::shared_ptr<std::vector<char>> scratch);

  uint64_t id_ = 0;
  asio::io_context::executor_type executor_;
  RequestLimiter limiter_;
  std::shared_ptr<ConnectionRegistry> registry_;
  GuardedSocket* socket_ = nullptr;
  State state_ = State::open;
  std::optional<ReadHandler> held_;  // a read RESTinio is waiting for, not given to it yet
  size_t in_flight_ = 0;             // requests handed to the server and not answered yet
  size_t writes_ = 0;                // writes on the socket not finished yet
  size_t probe_left_ = 0;            // bytes of the probe still to drop from the answer
  bool probed_ = false;
  std::string refusal_;              // the whole HTTP refusal to write
  bool refusal_sent_ = false;
  size_t drained_ = 0;               // bytes read and dropped after the refusal
  std::unique_ptr<asio::steady_timer> timer_;
};

class GuardedSocket : public asio::ip::tcp::socket {
 public:
  using base_type = asio::ip::tcp::socket;

  GuardedSocket(base_type&& socket, std::shared_ptr<ConnectionIo> io)
      : base_type(std::move(socket)), io_(std::move(io)) {}
  GuardedSocket(GuardedSocket&& other) noexcept : base_type(std::move(other)), io_(std::move(other.io_)) {}
  GuardedSocket& operator=(GuardedSocket&&) = delete;
  ~GuardedSocket() {
    if (io_) io_->unbind(this);
  }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    io_->bind(this);
    const asio::mutable_buffer first = *asio::buffer_sequence_begin(buffers);  // RESTinio reads into one buffer
    io_->read(first, ConnectionIo::ReadHandler(std::forward<Handler>(handler)));
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    io_->bind(this);
    std::vector<asio::const_buffer> out(asio::buffer_sequence_begin(buffers), asio::buffer_sequence_end(buffers));
    const size_t dropped = io_->drop_probe_prefix(&out);
    io_->write_started();
    std::decay_t<Handler> h(std::forward<Handler>(handler));
    if (asio::buffer_size(out) == 0) {
      asio::post(get_executor(), [io = io_, dropped, h = std::move(h)]() mutable {
        io->write_finished();
        h(asio::error_code{}, dropped);
      });
      return;
    }
    base_type::async_write_some(out, [io = io_, dropped, h = std::move(h)](const asio::error_code& ec, size_t n) mutable {
      io->write_finished();
      h(ec, n + (ec ? 0 : dropped));
    });
  }

  void cancel(asio::error_code& ec) {
    io_->cancelled(/*closing=*/false);
    base_type::cancel(ec);
  }
  void close() {
    io_->cancelled(/*closing=*/true);
    base_type::close();
  }
  void close(asio::error_code& ec) {
    io_->cancelled(/*closing=*/true);
    base_type::close(ec);
  }

 private:
  std::shared_ptr<ConnectionIo> io_;
};

}  // namespace troupe::apps::serve
