#include "apps/serve/guarded_socket.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/frontend/openai/errors.hpp"
#include "troupe/log.hpp"

namespace troupe::apps::serve {
namespace {

// Every answer RESTinio writes begins so (it writes HTTP/1.1 whatever the request's version).
constexpr std::string_view kAnswerStart = "HTTP/1.1 ";
// After a refusal: how long, and how much, the client's further bytes are read and dropped.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 8u << 20;

thread_local ConnectionRegistry* tl_registry = nullptr;

std::string http_refusal(const openai::ApiError& error) {
  const std::string body = openai::render_error(error);
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nServer: troupe\r\nConnection: close\r\n"
      "Content-Length: {}\r\n\r\n{}",
      error.http_status, openai::reason_phrase(error.http_status), body.size(), body);
}

}  // namespace

std::shared_ptr<ConnectionIo> ConnectionRegistry::find(uint64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second.lock();
}

size_t ConnectionRegistry::busy() const {
  size_t n = 0;
  for (const auto& [id, weak] : by_id_)
    if (auto io = weak.lock()) n += io->busy();
  return n;
}

ConnectionRegistry* ConnectionRegistry::current() { return tl_registry; }
void ConnectionRegistry::set_current(ConnectionRegistry* registry) { tl_registry = registry; }

void http_request_started(uint64_t connection_id) {
  if (tl_registry == nullptr) return;
  if (auto io = tl_registry->find(connection_id)) io->request_started();
}

void http_request_answered(uint64_t connection_id) {
  if (tl_registry == nullptr) return;
  if (auto io = tl_registry->find(connection_id)) io->request_answered();
}

ConnectionIo::ConnectionIo(asio::io_context& io, RequestLimits limits, std::shared_ptr<ConnectionRegistry> registry)
    : executor_(io.get_executor()), limiter_(limits), registry_(std::move(registry)) {}

ConnectionIo::~ConnectionIo() {
  if (id_ != 0 && registry_) registry_->remove(id_);
}

void ConnectionIo::set_id(uint64_t id) {
  id_ = id;
  registry_->add(id, weak_from_this());
}

asio::ip::tcp::socket& ConnectionIo::base() { return static_cast<asio::ip::tcp::socket&>(*socket_); }

void ConnectionIo::read(asio::mutable_buffer buffer, ReadHandler handler) {
  if (state_ != State::open || socket_ == nullptr) {
    held_ = std::move(handler);
    settle();
    return;
  }
  base().async_read_some(buffer, [self = shared_from_this(), buffer, h = std::move(handler)](
                                     const asio::error_code& ec, size_t n) mutable {
    self->after_read(buffer, std::move(h), ec, n);
  });
}

void ConnectionIo::after_read(asio::mutable_buffer buffer, ReadHandler handler, const asio::error_code& ec, size_t n) {
  if (ec == asio::error::eof && state_ == State::open) return on_end_of_input(std::move(handler));
  if (ec || state_ != State::open) return handler(ec, n);
  auto fed = limiter_.feed(static_cast<const char*>(buffer.data()), n);
  if (fed.verdict == RequestLimiter::Verdict::ok) return handler(ec, n);
  refuse(fed.verdict, fed.detail);
  if (fed.pass > 0) return handler(ec, fed.pass);  // the requests before it; RESTinio reads again and waits
  held_ = std::move(handler);
  settle();
}

// The client's FIN: given to RESTinio (which closes) once nothing is in flight.
void ConnectionIo::on_end_of_input(ReadHandler handler) {
  if (busy() == 0) return handler(asio::error::eof, 0);
  state_ = State::half_closed;
  held_ = std::move(handler);
  if (registry_->hooks.may_probe && registry_->hooks.may_probe(id_)) probe();
}

void ConnectionIo::refuse(RequestLimiter::Verdict verdict, const std::string& detail) {
  state_ = State::refusing;
  openai::ApiError error;
  switch (verdict) {
    case RequestLimiter::Verdict::body_too_large:
      error = openai::payload_too_large(limiter_.limits().max_body_bytes);
      break;
    case RequestLimiter::Verdict::head_too_large:
      error = openai::headers_too_large(limiter_.limits().max_head_bytes);
      break;
    default:
      error = openai::malformed_request(detail);
      break;
  }
  TROUPE_LOG_DEBUG("HTTP connection {}: {} {}", id_, error.http_status, error.message);
  if (registry_->hooks.refused) registry_->hooks.refused(error.http_status);
  refusal_ = http_refusal(error);
}

void ConnectionIo::request_answered() {
  if (in_flight_ > 0) --in_flight_;
  settle();
}

void ConnectionIo::write_finished() {
  if (writes_ > 0) --writes_;
  settle();
}

// Moves a held connection on once everything before is answered.
void ConnectionIo::settle() {
  if (!held_ || busy() > 0 || socket_ == nullptr) return;
  if (state_ == State::refusing) {
    if (!refusal_sent_) send_refusal();
    return;
  }
  if (state_ == State::half_closed) release(asio::error::eof);
}

void ConnectionIo::release(const asio::error_code& ec) {
  if (!held_) return;
  auto h = std::move(*held_);
  held_.reset();
  if (timer_) timer_->cancel();
  asio::post(executor_, [h = std::move(h), ec]() mutable { h(ec, 0); });
}

void ConnectionIo::cancelled(bool closing) {
  if (closing) state_ = State::closed;
  if (held_) release(asio::error::operation_aborted);
  if (timer_) timer_->cancel();
}

size_t ConnectionIo::drop_probe_prefix(std::vector<asio::const_buffer>* buffers) {
  size_t dropped = 0;
  for (auto& b : *buffers) {
    if (probe_left_ == 0) break;
    const size_t k = std::min(probe_left_, b.size());
    const std::string_view got(static_cast<const char*>(b.data()), k);
    const size_t at = kAnswerStart.size() - probe_left_;
    if (got != kAnswerStart.substr(at, k))
      TROUPE_LOG_ERROR("HTTP connection {}: an answer after a probe does not begin with '{}'", id_, kAnswerStart);
    b += k;
    probe_left_ -= k;
    dropped += k;
  }
  return dropped;
}

// Writes the first bytes every answer begins with; a client that closed its socket
// answers them with a reset.
void ConnectionIo::probe() {
  if (probed_ || writes_ > 0 || socket_ == nullptr) return;
  probed_ = true;
  probe_left_ = kAnswerStart.size();
  ++writes_;
  asio::async_write(base(), asio::buffer(kAnswerStart.data(), kAnswerStart.size()),
                    [self = shared_from_this()](const asio::error_code& ec, size_t) {
                      if (self->writes_ > 0) --self->writes_;
                      if (ec) return self->release(asio::error::connection_reset);
                      self->watch_for_reset(0);
                    });
}

// A reset leaves the socket hung up (POLLHUP or POLLERR); a half-closed peer leaves it
// readable (its end of input) and nothing more.
void ConnectionIo::watch_for_reset(int round) {
  if (state_ != State::half_closed || !held_ || socket_ == nullptr) return;
  pollfd p{base().native_handle(), POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR))) {
    TROUPE_LOG_DEBUG("HTTP connection {}: the client is gone (reset after its half-close)", id_);
    return release(asio::error::connection_reset);
  }
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(executor_);
  timer_->expires_after(std::chrono::milliseconds(std::min(25 << std::min(round, 4), 500)));
  timer_->async_wait([self = shared_from_this(), round](const asio::error_code& ec) {
    if (!ec) self->watch_for_reset(round + 1);
  });
}

void ConnectionIo::send_refusal() {
  refusal_sent_ = true;
  ++writes_;
  asio::async_write(base(), asio::buffer(refusal_), [self = shared_from_this()](const asio::error_code& ec, size_t) {
    if (self->writes_ > 0) --self->writes_;
    if (ec || self->socket_ == nullptr) return self->release(asio::error::eof);
    self->linger();
  });
}

// After the refusal: our side is done; what the client still sends is read and dropped
// for a moment, so that the close is a FIN after it (not a reset before it was read).
void ConnectionIo::linger() {
  asio::error_code ignored;
  base().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  timer_ = std::make_unique<asio::steady_timer>(executor_);
  timer_->expires_after(kLingerTime);
  timer_->async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || self->socket_ == nullptr) return;
    asio::error_code ignore;
    self->base().cancel(ignore);
  });
  drain(std::make_shared<std::vector<char>>(64u << 10));
}

void ConnectionIo::drain(std::shared_ptr<std::vector<char>> scratch) {
  base().async_read_some(asio::buffer(*scratch), [self = shared_from_this(), scratch](const asio::error_code& ec,
                                                                                      size_t n) {
    if (ec || self->socket_ == nullptr || self->state_ == State::closed) return self->release(asio::error::eof);
    self->drained_ += n;
    if (self->drained_ >= kLingerBytes) return self->release(asio::error::eof);
    self->drain(scratch);
  });
}

}  // namespace troupe::apps::serve
