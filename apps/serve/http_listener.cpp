#include "apps/serve/http_listener.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "runtime/frontend/openai/errors.hpp"
#include "troupe/log.hpp"

namespace troupe::apps::serve {
namespace {

constexpr auto kProbeReadTime = std::chrono::seconds(2);
constexpr size_t kProbeHeadBytes = 8u << 10;
constexpr size_t kShedPerRound = 64;  // connections answered 503 per round while out of descriptors
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr size_t kLingerBytes = 64u << 10;

std::string whole_response(int status, std::string_view content_type, std::string_view body,
                           std::string_view extra_headers = "") {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nServer: troupe\r\nConnection: close\r\n{}"
                     "Content-Length: {}\r\n\r\n{}",
                     status, openai::reason_phrase(status), content_type, extra_headers, body.size(), body);
}

std::string unavailable_response(const std::string& why) {
  return whole_response(503, "application/json", openai::render_error(openai::from_status(unavailable(why))),
                        "Retry-After: 1\r\n");
}

// Best effort, never blocking: a client past the cap or in a shed gets what fits.
void send_and_close(int fd, const std::string& bytes) {
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

int open_spare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace

DescriptorBudget raise_descriptor_limit() {
  DescriptorBudget b;
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0) {
    const rlim_t wanted = r.rlim_max == RLIM_INFINITY ? std::max<rlim_t>(r.rlim_cur, 1u << 20) : r.rlim_max;
    if (wanted > r.rlim_cur) {
      rlimit raised{wanted, r.rlim_max};
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
        TROUPE_LOG_INFO("Raised the open file limit (RLIMIT_NOFILE) from {} to {}", r.rlim_cur, wanted);
        r.rlim_cur = wanted;
      } else {
        TROUPE_LOG_WARNING("cannot raise the open file limit from {} to {}: {}", r.rlim_cur, wanted,
                           std::strerror(errno));
      }
    }
    b.soft = r.rlim_cur;
    b.hard = r.rlim_max;
  } else {
    b.soft = b.hard = 1024;
  }
  const uint64_t reserve = std::max<uint64_t>(256, b.soft / 4);
  b.default_max_connections = static_cast<size_t>(std::min<uint64_t>(b.soft > reserve + 64 ? b.soft - reserve : 64,
                                                                      65536));
  return b;
}

Status check_max_connections(size_t max_connections, size_t probe_slots, const DescriptorBudget& budget) {
  if (max_connections < 1) return invalid_argument("--max-connections must be at least 1");
  const size_t reserved = 2 * probe_slots + 64;  // the reserved places, as many lingering closes, the rest
  if (max_connections + reserved > budget.soft)
    return invalid_argument(fmt::format(
        "--max-connections {} does not fit the open file limit (RLIMIT_NOFILE {}, hard limit {}): at most {} "
        "(the limit less {} reserved places for health checks, {} for closing answered ones and 64 for the rest "
        "of the process)",
        max_connections, budget.soft, budget.hard, budget.soft > reserved ? budget.soft - reserved : 0, probe_slots,
        probe_slots));
  return {};
}

/// A connection answered past the cap, read to its end before it is closed.
struct HttpListener::Lingering {
  Lingering(asio::ip::tcp::socket s, asio::io_context& io) : socket(std::move(s)), timer(io) {}
  asio::ip::tcp::socket socket;
  asio::steady_timer timer;
  std::array<char, 4096> sink;
  size_t read = 0;
};

/// A connection past the cap, read until its request head (a probe route is answered).
struct HttpListener::Probe {
  explicit Probe(asio::ip::tcp::socket s, asio::io_context& io) : socket(std::move(s)), timer(io) {}
  asio::ip::tcp::socket socket;
  asio::steady_timer timer;
  std::string head;
  bool done = false;
};

HttpListener::HttpListener(asio::io_context& io, ListenerOptions options, restinio::server_settings_t<Traits> settings,
                           ProbeAnswers answers)
    : io_(io), options_(std::move(options)), answers_(std::move(answers)), acceptor_(io), retry_(io) {
  settings.ensure_valid_connection_state_listener();
  settings.ensure_valid_ip_blocker();
  auto timer_factory = settings.timer_factory();
  timers_ = timer_factory->create(io_);
  // As http_server_t builds them (restinio/http_server.hpp).
  connection_settings_ = std::make_shared<restinio::impl::connection_settings_t<Traits>>(
      std::move(settings), restinio::impl::create_parser_settings<typename Traits::http_methods_mapper_t>(), timers_);
  factory_ = std::make_shared<restinio::impl::connection_factory_t<Traits>>(connection_settings_,
                                                                            settings.socket_options_setter());
  stats_.max_connections = options_.max_connections;
  registry_->hooks.refused = [this](int status) {
    if (status == 413) ++stats_.refused_413;
    else if (status == 431) ++stats_.refused_431;
    else ++stats_.refused_400;
  };
}

HttpListener::~HttpListener() {
  registry_->hooks.refused = nullptr;
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

Status HttpListener::open() {
  try {
    std::string host = options_.host;
    if (host == "localhost") host = "127.0.0.1";
    const auto address = asio::ip::make_address(host);
    asio::ip::tcp::endpoint ep(address, options_.port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
  } catch (const std::exception& ex) {
    asio::error_code ignored;
    acceptor_.close(ignored);
    return unavailable(fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, ex.what()));
  }
  timers_->start();
  spare_fd_ = open_spare();
  accept();
  return {};
}

void HttpListener::close() {
  if (closed_) return;
  closed_ = true;
  asio::error_code ignored;
  retry_.cancel();
  acceptor_.close(ignored);
  for (auto& p : probes_) p->socket.close(ignored), p->timer.cancel();
  probes_.clear();
  for (auto& l : lingering_) l->socket.close(ignored), l->timer.cancel();
  lingering_.clear();
  timers_->stop();
}

ListenerStats HttpListener::stats() const {
  ListenerStats s = stats_;
  s.open = count_->open;
  return s;
}

void HttpListener::accept() {
  if (closed_) return;
  acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    on_accepted(ec, std::move(socket));
  });
}

void HttpListener::on_accepted(const asio::error_code& ec, asio::ip::tcp::socket socket) {
  if (closed_ || ec == asio::error::operation_aborted) return;
  log_.flush();
  if (!ec) {
    if (count_->open < options_.max_connections) start_connection(std::move(socket));
    else past_the_cap(std::move(socket));
    return accept();
  }
  ++stats_.accept_errors;
  const int err = ec.value();
  const bool out_of_fds = err == EMFILE || err == ENFILE;
  const bool out_of_memory = err == ENOBUFS || err == ENOMEM;
  log_.refuse(std::string("accept: ") + ec.message(),
              fmt::format("HTTP server: accepting a connection failed: {} ({} open, --max-connections {}); "
                          "accepting again{}",
                          ec.message(), count_->open, options_.max_connections,
                          out_of_fds ? ": the waiting connections get 503 until descriptors are free" : ""),
              log::Level::error);
  if (out_of_fds) shed_waiting();
  if (!out_of_fds && !out_of_memory) return accept();
  retry_.expires_after(std::chrono::milliseconds(20));
  retry_.async_wait([this](const asio::error_code& e) {
    if (!e) accept();
  });
}

// Out of descriptors: the spare one makes room to take a waiting connection, answer it and
// close it, a few at a time, so that clients hear why instead of waiting.
void HttpListener::shed_waiting() {
  if (spare_fd_ < 0) return;
  ::close(spare_fd_);
  spare_fd_ = -1;
  const std::string busy = unavailable_response("the server is out of file descriptors; retry shortly");
  for (size_t k = 0; k < kShedPerRound; ++k) {
    const int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    ++stats_.shed;
    send_and_close(fd, busy);
  }
  spare_fd_ = open_spare();
}

void HttpListener::start_connection(asio::ip::tcp::socket socket) {
  asio::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // gone already
  auto io = std::make_shared<ConnectionIo>(io_, options_.limits, registry_);
  try {
    auto conn = factory_->create_new_connection(GuardedSocket(std::move(socket), io), remote, ConnectionSlot(count_));
    io->set_id(conn->connection_id());
    conn->init();
  } catch (const std::exception& ex) {
    TROUPE_LOG_ERROR("HTTP server: cannot set up a connection from {}: {}", remote.address().to_string(), ex.what());
  }
}

std::string HttpListener::too_many() const {
  return unavailable_response(
      fmt::format("too many connections: --max-connections {} are open; retry shortly", options_.max_connections));
}

void HttpListener::past_the_cap(asio::ip::tcp::socket socket) {
  ++stats_.over_limit;
  log_.refuse("max_connections",
              fmt::format("HTTP server: {} connections are open (--max-connections {}): new ones get 503 (probe "
                          "routes are still answered)",
                          count_->open, options_.max_connections));
  if (probes_.size() >= options_.probe_slots) {
    // Idle: nothing read yet and nothing waiting to be read (a probe that sent its request
    // a moment ago keeps its place).
    auto idle = std::find_if(probes_.begin(), probes_.end(), [](const auto& p) {
      char c;
      return p->head.empty() && ::recv(p->socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
    });
    if (idle == probes_.end()) {
      const std::string busy = too_many();
      (void)::send(socket.native_handle(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      return linger_close(std::move(socket));
    }
    auto evicted = *idle;
    finish_probe(evicted, too_many());
  }
  auto p = std::make_shared<Probe>(std::move(socket), io_);
  probes_.push_back(p);
  p->timer.expires_after(kProbeReadTime);
  p->timer.async_wait([this, p](const asio::error_code& ec) {
    if (!ec && !p->done) finish_probe(p, too_many());
  });
  read_probe(p);
}

void HttpListener::read_probe(const std::shared_ptr<Probe>& p) {
  auto buffer = std::make_shared<std::array<char, 2048>>();
  p->socket.async_read_some(asio::buffer(*buffer), [this, p, buffer](const asio::error_code& ec, size_t n) {
    if (p->done) return;
    if (ec) return finish_probe(p, "");
    p->head.append(buffer->data(), n);
    if (p->head.find("\r\n\r\n") != std::string::npos || p->head.size() >= kProbeHeadBytes) return answer_probe(p);
    read_probe(p);
  });
}

void HttpListener::answer_probe(const std::shared_ptr<Probe>& p) {
  // "GET /health?x HTTP/1.1": the method and the path without its query.
  const std::string_view head(p->head);
  const size_t sp1 = head.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : head.find(' ', sp1 + 1);
  std::optional<PlainAnswer> answer;
  if (sp2 != std::string_view::npos && answers_) {
    std::string_view path = head.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    answer = answers_(head.substr(0, sp1), path);
  }
  if (!answer) return finish_probe(p, too_many());
  ++stats_.probes_answered;
  finish_probe(p, whole_response(answer->status, answer->content_type, answer->body));
}

// Writes `response` (none: just closes), then closes; the place is free at once.
void HttpListener::finish_probe(const std::shared_ptr<Probe>& p, std::string response) {
  if (p->done) return;
  p->done = true;
  p->timer.cancel();
  probes_.remove(p);
  if (response.empty() || !p->socket.is_open()) {
    asio::error_code ignored;
    p->socket.close(ignored);
    return;
  }
  auto bytes = std::make_shared<std::string>(std::move(response));
  asio::async_write(p->socket, asio::buffer(*bytes), [this, p, bytes](const asio::error_code&, size_t) {
    if (closed_) return;  // close() closed it
    linger_close(std::move(p->socket));
  });
}

// Half-close, then read what the client still sends until it closes too (or the time or
// byte bound passes): closing with its bytes unread would reset the connection and lose
// the answer just written.
void HttpListener::linger_close(asio::ip::tcp::socket socket) {
  asio::error_code ignored;
  socket.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  if (closed_ || lingering_.size() >= options_.probe_slots) {
    socket.close(ignored);
    return;
  }
  auto l = std::make_shared<Lingering>(std::move(socket), io_);
  lingering_.push_back(l);
  l->timer.expires_after(kLingerTime);
  l->timer.async_wait([this, l](const asio::error_code& ec) {
    if (ec) return;
    asio::error_code e;
    l->socket.close(e);
  });
  read_to_end(l);
}

void HttpListener::read_to_end(const std::shared_ptr<Lingering>& l) {
  l->socket.async_read_some(asio::buffer(l->sink), [this, l](const asio::error_code& ec, size_t n) {
    l->read += n;
    if (!ec && l->read < kLingerBytes) return read_to_end(l);
    asio::error_code ignored;
    l->timer.cancel();
    l->socket.close(ignored);
    if (!closed_) lingering_.remove(l);
  });
}

}  // namespace troupe::apps::serve
