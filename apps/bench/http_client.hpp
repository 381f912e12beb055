// A small blocking HTTP/1.1 client on asio, for `troupe bench serve` and the
// black-box tests: one request per connection (Connection: close), chunked
// transfer decoding, body pieces handed over as they arrive, and an SSE
// parser for "data:" events. Every wait has a deadline.
#pragma once

#include <asio.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::apps::http {

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // decoded (de-chunked) body, unless streamed
};

/// Called with each decoded body piece as it arrives; return false to stop
/// reading and close the connection (a client disconnect).
using OnData = std::function<bool(std::string_view)>;
using Headers = std::vector<std::pair<std::string, std::string>>;

/// One TCP connection. The deadline of each call is `timeout` from its start.
class Connection {
 public:
  Connection();
  Status connect(const std::string& host, int port, std::chrono::milliseconds timeout);
  Status write(std::string_view bytes, std::chrono::milliseconds timeout);
  /// Read one response. With on_data, body pieces go there and Response::body stays empty.
  Result<Response> read_response(std::chrono::milliseconds timeout, const OnData& on_data = {});
  void close();

 private:
  Status read_some(std::string* buffer, std::chrono::steady_clock::time_point deadline);
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

/// "METHOD target HTTP/1.1" with Host, Content-Length and Connection: close.
std::string build_request(const std::string& method, const std::string& host, int port, const std::string& target,
                          const std::string& body, const Headers& headers);

/// Connect, send, read the response. Errors are transport errors; HTTP errors are a Response.
Result<Response> request(const std::string& host, int port, const std::string& method, const std::string& target,
                         const std::string& body = "", const Headers& headers = {}, const OnData& on_data = {},
                         std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// Splits a byte stream into SSE events and hands each event's data (the
/// "data:" lines joined by '\n') to the callback.
class SseParser {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_event);

 private:
  std::string buffer_;
};

struct Url {
  std::string host;
  int port = 80;
  std::string base_path;  // without a trailing '/'
};
/// "http://host:port[/path]"; https is not supported.
Result<Url> parse_url(const std::string& url);

}  // namespace troupe::apps::http
