#include "apps/bench/http_client.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

namespace troupe::apps::http {
namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

// Runs the io_context until `done` or the deadline; on timeout cancels the
// socket's operations and reports timed out.
template <class Start>
asio::error_code run_op(asio::io_context& io, asio::ip::tcp::socket& socket, Clock::time_point deadline,
                        Start start, size_t* transferred = nullptr) {
  bool done = false;
  asio::error_code result;
  start([&](const asio::error_code& ec, size_t n) {
    done = true;
    result = ec;
    if (transferred) *transferred = n;
  });
  io.restart();
  while (!done) {
    auto now = Clock::now();
    if (now >= deadline) break;
    io.run_one_for(deadline - now);
  }
  if (!done) {
    asio::error_code ignored;
    socket.close(ignored);
    io.restart();
    io.run();  // lets the cancelled handler run
    return asio::error::timed_out;
  }
  return result;
}

}  // namespace

Connection::Connection() : socket_(io_) {}

Status Connection::connect(const std::string& host, int port, std::chrono::milliseconds timeout) {
  asio::error_code ec;
  auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return invalid_argument(fmt::format("not an IP address: '{}' ({})", host, ec.message()));
  asio::ip::tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  ec = run_op(io_, socket_, Clock::now() + timeout, [&](auto handler) {
    socket_.async_connect(endpoint, [handler](const asio::error_code& e) mutable { handler(e, 0); });
  });
  if (ec) return unavailable(fmt::format("connect to {}:{} failed: {}", host, port, ec.message()));
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  return {};
}

Status Connection::write(std::string_view bytes, std::chrono::milliseconds timeout) {
  auto ec = run_op(io_, socket_, Clock::now() + timeout, [&](auto handler) {
    asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()), handler);
  });
  if (ec) return unavailable(fmt::format("write failed: {}", ec.message()));
  return {};
}

Status Connection::read_some(std::string* buffer, Clock::time_point deadline) {
  char chunk[16384];
  size_t n = 0;
  auto ec = run_op(io_, socket_, deadline, [&](auto handler) {
    socket_.async_read_some(asio::buffer(chunk, sizeof chunk), handler);
  }, &n);
  buffer->append(chunk, n);
  if (ec == asio::error::eof) return {StatusCode::data_loss, "eof"};
  if (ec) return unavailable(fmt::format("read failed: {}", ec.message()));
  return {};
}

Result<Response> Connection::read_response(std::chrono::milliseconds timeout, const OnData& on_data) {
  const auto deadline = Clock::now() + timeout;
  std::string buf;
  Response response;
  // Status line and headers.
  size_t header_end = std::string::npos;
  while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > (1u << 20)) return data_loss("response headers too large");
    Status st = read_some(&buf, deadline);
    if (!st.ok()) {
      if (st.code() == StatusCode::data_loss) return unavailable("connection closed before a response");
      return st;
    }
  }
  std::string_view head(buf.data(), header_end);
  size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (status_line.substr(0, 5) != "HTTP/" || status_line.size() < 12) return data_loss("bad status line");
  response.status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
  size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos) e = head.size();
    std::string_view line = head.substr(pos, e - pos);
    size_t colon = line.find(':');
    if (colon != std::string_view::npos)
      response.headers[lower(std::string(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    pos = e + 2;
  }
  buf.erase(0, header_end + 4);

  auto deliver = [&](std::string_view piece) -> bool {
    if (piece.empty()) return true;
    if (on_data) return on_data(piece);
    response.body.append(piece);
    return true;
  };
  auto stopped = [&]() -> Result<Response> {
    close();
    return response;
  };

  auto te = response.headers.find("transfer-encoding");
  if (te != response.headers.end() && lower(te->second).find("chunked") != std::string::npos) {
    // Chunked: "<hex size>\r\n<data>\r\n" ... "0\r\n\r\n".
    while (true) {
      size_t le;
      while ((le = buf.find("\r\n")) == std::string::npos) {
        Status st = read_some(&buf, deadline);
        if (!st.ok()) return st.code() == StatusCode::data_loss ? data_loss("truncated chunked body") : st;
      }
      size_t size = std::strtoul(buf.substr(0, le).c_str(), nullptr, 16);
      buf.erase(0, le + 2);
      if (size == 0) break;
      while (buf.size() < size + 2) {
        Status st = read_some(&buf, deadline);
        if (!st.ok()) return st.code() == StatusCode::data_loss ? data_loss("truncated chunk") : st;
      }
      if (!deliver(std::string_view(buf.data(), size))) return stopped();
      buf.erase(0, size + 2);
    }
    return response;
  }
  auto cl = response.headers.find("content-length");
  if (cl != response.headers.end()) {
    size_t want = std::strtoull(cl->second.c_str(), nullptr, 10);
    size_t got = 0;
    while (true) {
      size_t take = std::min(want - got, buf.size());
      if (!deliver(std::string_view(buf.data(), take))) return stopped();
      got += take;
      buf.clear();
      if (got >= want) break;
      Status st = read_some(&buf, deadline);
      if (!st.ok()) return st.code() == StatusCode::data_loss ? data_loss("truncated body") : st;
    }
    return response;
  }
  // Neither: the body runs to EOF.
  while (true) {
    if (!deliver(buf)) return stopped();
    buf.clear();
    Status st = read_some(&buf, deadline);
    if (st.code() == StatusCode::data_loss) {
      if (!deliver(buf)) return stopped();
      break;
    }
    if (!st.ok()) return st;
  }
  return response;
}

void Connection::close() {
  asio::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

std::string build_request(const std::string& method, const std::string& host, int port, const std::string& target,
                          const std::string& body, const Headers& headers) {
  std::string r = fmt::format("{} {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n", method, target, host, port);
  bool has_type = false;
  for (const auto& [k, v] : headers) {
    r += fmt::format("{}: {}\r\n", k, v);
    has_type = has_type || lower(k) == "content-type";
  }
  if (!body.empty() || method == "POST") {
    if (!has_type) r += "Content-Type: application/json\r\n";
    r += fmt::format("Content-Length: {}\r\n", body.size());
  }
  r += "\r\n";
  r += body;
  return r;
}

Result<Response> request(const std::string& host, int port, const std::string& method, const std::string& target,
                         const std::string& body, const Headers& headers, const OnData& on_data,
                         std::chrono::milliseconds timeout) {
  Connection c;
  TROUPE_RETURN_IF_ERROR(c.connect(host, port, timeout));
  TROUPE_RETURN_IF_ERROR(c.write(build_request(method, host, port, target, body, headers), timeout));
  auto r = c.read_response(timeout, on_data);
  c.close();
  return r;
}

void SseParser::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_event) {
  buffer_.append(bytes);
  while (true) {
    // Events end with a blank line ("\n\n" or "\r\n\r\n").
    size_t end = buffer_.find("\n\n");
    size_t crlf = buffer_.find("\r\n\r\n");
    size_t sep = 2;
    if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
      end = crlf;
      sep = 4;
    }
    if (end == std::string::npos) return;
    std::string event = buffer_.substr(0, end);
    buffer_.erase(0, end + sep);
    std::string data;
    bool any = false;
    size_t pos = 0;
    while (pos <= event.size()) {
      size_t e = event.find('\n', pos);
      if (e == std::string::npos) e = event.size();
      std::string_view line(event.data() + pos, e - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (any) data += '\n';
        data.append(line);
        any = true;
      }
      pos = e + 1;
    }
    if (any) on_event(data);
  }
}

Result<Url> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return invalid_argument(fmt::format("only http:// URLs are supported: '{}'", url));
  std::string rest = url.substr(scheme.size());
  Url u;
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.base_path = rest.substr(slash);
  while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos) {
    u.host = authority.substr(0, colon);
    char* end = nullptr;
    long p = std::strtol(authority.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535) return invalid_argument(fmt::format("bad port in '{}'", url));
    u.port = static_cast<int>(p);
  } else {
    u.host = authority;
  }
  if (u.host.empty()) return invalid_argument(fmt::format("no host in '{}'", url));
  return u;
}

}  // namespace troupe::apps::http
