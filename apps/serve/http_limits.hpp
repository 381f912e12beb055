// The HTTP server's limits on what a client sends, checked on the bytes of a
// connection before RESTinio reads them (guarded_socket.hpp feeds every read
// through one RequestLimiter): a request head (request line and headers) of at
// most `max_head_bytes`, a body of at most `max_body_bytes` (a Content-Length
// above it is refused from the headers alone, before one byte of the body is
// read; a chunked body when its running total passes it), and well-formed
// HTTP/1.x. RESTinio's own parser would only close the connection (it answers
// no 413, 431 or 400); the limiter says which request broke which limit, and
// where its first byte is, so the requests before it on the connection still
// reach RESTinio and get their answers.
//
// It runs the same parser RESTinio does (nodejs' http_parser), as a second pass
// that keeps nothing but counts.
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::apps::serve {

struct RequestLimits {
  uint64_t max_body_bytes = 1u << 20;  // --max-body-bytes
  size_t max_head_bytes = 64u << 10;   // request line and headers, without separators
};

class RequestLimiter {
 public:
  enum class Verdict { ok, body_too_large, head_too_large, malformed };
  struct Fed {
    size_t pass = 0;  // leading bytes of the chunk that belong to requests within the limits
    Verdict verdict = Verdict::ok;
    std::string detail;  // malformed: what the parser saw
  };

  explicit RequestLimiter(RequestLimits limits);
  RequestLimiter(const RequestLimiter&) = delete;
  RequestLimiter& operator=(const RequestLimiter&) = delete;

  /// The next bytes of the connection. Once a verdict other than ok is given, every later
  /// call gives it again with nothing to pass.
  Fed feed(const char* data, size_t n);

  const RequestLimits& limits() const { return limits_; }

 private:
  static int on_url(http_parser* p, const char* at, size_t n);
  static int on_header_bytes(http_parser* p, const char* at, size_t n);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, size_t n);
  static int on_message_complete(http_parser* p);
  bool count_head(size_t n);

  RequestLimits limits_;
  http_parser parser_{};
  http_parser_settings settings_{};
  size_t head_bytes_ = 0;     // of the request being read
  uint64_t body_bytes_ = 0;   // of the request being read
  uint64_t message_bytes_ = 0;  // bytes of the request being read fed so far (0: none yet)
  bool message_done_ = false;
  bool passthrough_ = false;  // an upgrade: what follows is not HTTP
  Verdict verdict_ = Verdict::ok;
  std::string detail_;
};

}  // namespace troupe::apps::serve
