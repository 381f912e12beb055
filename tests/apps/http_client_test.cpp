// Unit tests of the bench/test HTTP client: chunked decoding, SSE parsing,
// early stop, URL parsing and the latency statistics, against a tiny
// in-process asio server that answers with canned bytes.
#include <gtest/gtest.h>

#include <thread>

#include <fmt/format.h>

#include "apps/bench/bench_serve.hpp"
#include "apps/bench/http_client.hpp"

namespace troupe::apps {
namespace {

// Accepts one connection, reads the request head, writes `reply` and closes.
class CannedServer {
 public:
  explicit CannedServer(std::string reply)
      : acceptor_(io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), reply_(std::move(reply)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] {
      asio::ip::tcp::socket s(io_);
      asio::error_code ec;
      acceptor_.accept(s, ec);
      if (ec) return;
      asio::streambuf buf;
      asio::read_until(s, buf, "\r\n\r\n", ec);
      asio::write(s, asio::buffer(reply_), ec);
      s.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    });
  }
  ~CannedServer() { thread_.join(); }
  int port() const { return port_; }

 private:
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::string reply_;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpClient, ContentLengthBody) {
  CannedServer s("HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
  auto r = http::request("127.0.0.1", s.port(), "GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->headers["x-a"], "b");
}

TEST(HttpClient, ChunkedBodyAndSse) {
  auto chunk = [](const std::string& d) { return fmt::format("{:x}\r\n{}\r\n", d.size(), d); };
  CannedServer s("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk("data: {\"a\"") + chunk(":1}\n\n") +
                 chunk("data: [DONE]\n\n") + "0\r\n\r\n");
  std::vector<std::string> events;
  http::SseParser sse;
  auto r = http::request("127.0.0.1", s.port(), "POST", "/s", "{}", {}, [&](std::string_view piece) {
    sse.feed(piece, [&](std::string_view d) { events.emplace_back(d); });
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "{\"a\":1}");
  EXPECT_EQ(events[1], "[DONE]");
}

TEST(HttpClient, StopEarlyAndTruncation) {
  CannedServer s("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n");
  int pieces = 0;
  auto r = http::request("127.0.0.1", s.port(), "GET", "/", "", {}, [&](std::string_view) { return ++pieces < 1; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(pieces, 1);
  CannedServer t("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  auto bad = http::request("127.0.0.1", t.port(), "GET", "/");
  EXPECT_FALSE(bad.ok());
}

TEST(HttpClient, ConnectFailureIsAStatus) {
  int port;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  auto r = http::request("127.0.0.1", port, "GET", "/", "", {}, {}, std::chrono::seconds(2));
  EXPECT_FALSE(r.ok());
}

TEST(HttpClient, SseParserHandlesSplitsAndCrlf) {
  http::SseParser p;
  std::vector<std::string> ev;
  auto cb = [&](std::string_view d) { ev.emplace_back(d); };
  p.feed("da", cb);
  p.feed("ta: x\r\n\r\n: comment\n\ndata:y\ndata: z\n\n", cb);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0], "x");
  EXPECT_EQ(ev[1], "y\nz");
}

TEST(HttpClient, ParseUrl) {
  auto u = http::parse_url("http://127.0.0.1:8123/base/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8123);
  EXPECT_EQ(u->base_path, "/base");
  EXPECT_EQ(http::parse_url("http://localhost")->port, 80);
  EXPECT_FALSE(http::parse_url("https://x").ok());
  EXPECT_FALSE(http::parse_url("http://x:99999").ok());
}

TEST(BenchStats, PercentilesLikeNumpy) {
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(bench::percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(bench::percentile(v, 90), 3.7);
  auto s = bench::summarize_ms({0.001, 0.003});
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_DOUBLE_EQ(s.std, 1.0);
}

}  // namespace
}  // namespace troupe::apps
