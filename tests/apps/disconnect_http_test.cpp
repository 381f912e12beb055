// Clients that hang up, against a real `troupe serve` on loopback (SmolLM2-135M from
// TROUPE_TEST_MODEL): a completion or chat request whose client closes its socket
// before the answer is aborted within a second, whole or streamed, every choice of
// it, as /metrics shows (no request running, each choice counted under
// finished_reason="abort"); a client that stays, keep-alive and pipelined ones
// included, gets its answer as before.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace http = apps::http;

// A generation far longer than any test waits: minutes on a CPU, unless aborted.
constexpr int kLongMaxTokens = 1900;

struct Metrics {
  double running = -1;
  double waiting = -1;
  double aborted = 0;  // troupe:request_success_total{finished_reason="abort"}
};

Metrics scrape(const tests::ServeProcess& s) {
  Metrics m;
  auto r = http::request("127.0.0.1", s.port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(10));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return m;
  std::istringstream in(r->body);
  std::string line;
  auto value = [&] { return std::stod(line.substr(line.rfind(' ') + 1)); };
  auto is = [&](const std::string& name) {
    return line.rfind(name, 0) == 0 && line.size() > name.size() && (line[name.size()] == '{' || line[name.size()] == ' ');
  };
  while (std::getline(in, line)) {
    if (is("troupe:num_requests_running")) m.running = value();
    if (is("troupe:num_requests_waiting")) m.waiting = value();
    if (is("troupe:request_success_total") && line.find("finished_reason=\"abort\"") != std::string::npos)
      m.aborted += value();
  }
  return m;
}

// A plain TCP client socket on 127.0.0.1:port (-1 on failure).
int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// What arrives on fd until `done(received)` or EOF or the deadline.
std::string receive(int fd, Clock::duration timeout, const std::function<bool(const std::string&)>& done) {
  std::string got;
  const auto deadline = Clock::now() + timeout;
  while (!done(got)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// An HTTP/1.1 POST as a keep-alive client sends it (no Connection: close).
std::string post_text(const std::string& path, const json& body, bool close = false) {
  const std::string b = body.dump();
  return fmt::format("POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{}",
                     path, b.size(), close ? "Connection: close\r\n" : "", b);
}

class DisconnectHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_.start({"--max-model-len", "2048", "--chat-template", "chatml"}); }
  static void TearDownTestSuite() { server_.stop(); }
  void SetUp() override {
    TROUPE_REQUIRE_SERVER(server_);
    const Metrics m = scrape(*server_);
    ASSERT_EQ(m.running, 0);
    ASSERT_EQ(m.waiting, 0);
  }

  // Sends `request` from a raw socket, waits until /metrics shows `choices` requests running
  // (and at least 0.3 s), lets `before_close` read from the socket, closes it, and expects
  // within a second: nothing running and `choices` more aborts.
  static void expect_aborted_on_close(const std::string& request, int choices,
                                      const std::function<void(int fd)>& before_close = {}) {
    const Metrics start = scrape(*server_);
    int fd = connect_loopback(server_->port());
    ASSERT_GE(fd, 0);
    const auto sent = Clock::now();
    ASSERT_TRUE(send_all(fd, request));
    const auto started_by = Clock::now() + std::chrono::seconds(60);
    Metrics m;
    while ((m = scrape(*server_)).running < choices && Clock::now() < started_by)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(m.running, choices) << "the request never ran";
    if (before_close) before_close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(300) - std::min<Clock::duration>(Clock::now() - sent, std::chrono::milliseconds(300)));
    ::close(fd);
    const auto closed = Clock::now();
    // Poll past the second, so that a failure says how long it really took.
    while (Clock::now() < closed + std::chrono::seconds(3)) {
      m = scrape(*server_);
      if (m.running == 0 && m.aborted >= start.aborted + choices) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - closed).count();
    EXPECT_EQ(m.running, 0) << "still running " << took << " ms after the client left";
    EXPECT_EQ(m.waiting, 0);
    EXPECT_EQ(m.aborted, start.aborted + choices) << "after " << took << " ms";
    EXPECT_LT(took, 1000) << "the abort took " << took << " ms";
    const auto health = http::request("127.0.0.1", server_->port(), "GET", "/health", "", {}, {}, std::chrono::seconds(5));
    ASSERT_TRUE(health.ok());
    EXPECT_EQ(health->status, 200);
  }

  static inline tests::SharedModelServer server_;
};

TEST_F(DisconnectHttp, WholeCompletionIsAbortedWhenItsClientLeaves) {
  expect_aborted_on_close(post_text("/v1/completions", {{"prompt", "Once upon a time"},
                                                        {"max_tokens", kLongMaxTokens},
                                                        {"ignore_eos", true}}),
                          1);
  EXPECT_NE(server_->log().find("client disconnected"), std::string::npos);
}

TEST_F(DisconnectHttp, WholeChatIsAbortedWithEveryChoiceWhenItsClientLeaves) {
  expect_aborted_on_close(post_text("/v1/chat/completions",
                                    {{"messages", {{{"role", "user"}, {"content", "Tell me a long story."}}}},
                                     {"max_tokens", kLongMaxTokens},
                                     {"ignore_eos", true},
                                     {"n", 2}}),
                          2);
}

TEST_F(DisconnectHttp, StreamIsAbortedWhenItsClientLeaves) {
  expect_aborted_on_close(post_text("/v1/completions", {{"prompt", "Once upon a time"},
                                                        {"max_tokens", kLongMaxTokens},
                                                        {"ignore_eos", true},
                                                        {"stream", true}}),
                          1, [](int fd) {
                            // A few events arrived: the stream is under way when the client leaves.
                            std::string got = receive(fd, std::chrono::seconds(30), [](const std::string& s) {
                              size_t events = 0;
                              for (size_t at = 0; (at = s.find("data: {", at)) != std::string::npos; ++at) ++events;
                              return events >= 3;
                            });
                            EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
                          });
}

// A client that half-closes after its request (shutdown(SHUT_WR), `nc -N`) has not left:
// RFC 9112 9.6. It gets its whole answer, then the close, and nothing is aborted.
TEST_F(DisconnectHttp, AHalfClosedClientGetsItsAnswerThenTheClose) {
  const double aborted = scrape(*server_).aborted;
  const json whole = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"ignore_eos", true}, {"temperature", 0}};
  auto quiet = http::request("127.0.0.1", server_->port(), "POST", "/v1/completions", whole.dump(),
                             {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(120));
  ASSERT_TRUE(quiet.ok() && quiet->status == 200);
  for (bool stream : {false, true}) {
    json body = whole;
    body["stream"] = stream;
    int fd = connect_loopback(server_->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, post_text("/v1/completions", body)));
    ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
    // Read until the server closes: the answer, then the end.
    const std::string got = receive(fd, std::chrono::seconds(120), [](const std::string&) { return false; });
    ::close(fd);
    ASSERT_NE(got.find("HTTP/1.1 200"), std::string::npos) << (stream ? "stream: " : "whole: ") << got;
    if (stream) {
      EXPECT_NE(got.find("\"finish_reason\":\"length\""), std::string::npos) << got;
      EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << got;
    } else {
      const json j = json::parse(got.substr(got.find("\r\n\r\n") + 4), nullptr, false);
      ASSERT_TRUE(j.is_object()) << got;
      EXPECT_EQ(j["choices"][0]["text"], json::parse(quiet->body)["choices"][0]["text"]);
      EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(scrape(*server_).aborted, aborted);
}

// A half-close followed by a real close: the server cannot tell them apart from the FIN,
// so it writes the first bytes of the answer early; the closed socket answers with a
// reset, and the request is aborted as for any client that left.
TEST_F(DisconnectHttp, AClientThatHalfClosesAndThenLeavesIsAborted) {
  expect_aborted_on_close(post_text("/v1/completions", {{"prompt", "Once upon a time"},
                                                        {"max_tokens", kLongMaxTokens},
                                                        {"ignore_eos", true}}),
                          1, [](int fd) {
                            ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
                            std::this_thread::sleep_for(std::chrono::milliseconds(300));
                            const auto m = scrape(*server_);
                            EXPECT_EQ(m.running, 1) << "a half-close aborted the request";
                          });
}

TEST_F(DisconnectHttp, ClientsThatStayGetTheirAnswers) {
  const double aborted = scrape(*server_).aborted;
  // Connection: close, one request.
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"ignore_eos", true}};
  auto r = http::request("127.0.0.1", server_->port(), "POST", "/v1/completions", body.dump(),
                         {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(120));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");

  // Keep-alive: two requests sent at once on one connection (pipelined), the second
  // closing it; both answered, in order.
  int fd = connect_loopback(server_->port());
  ASSERT_GE(fd, 0);
  json first = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"ignore_eos", true}};
  json second = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 8}, {"ignore_eos", true}};
  ASSERT_TRUE(send_all(fd, post_text("/v1/completions", first) + post_text("/v1/chat/completions", second, true)));
  const std::string got = receive(fd, std::chrono::seconds(120), [](const std::string&) { return false; });
  ::close(fd);
  const size_t one = got.find("HTTP/1.1 200");
  ASSERT_NE(one, std::string::npos) << got;
  const size_t two = got.find("HTTP/1.1 200", one + 1);
  ASSERT_NE(two, std::string::npos) << got;
  EXPECT_NE(got.substr(one, two - one).find("\"text_completion\""), std::string::npos) << got;
  EXPECT_NE(got.substr(two).find("\"chat.completion\""), std::string::npos) << got;

  // Then a keep-alive connection that answered and is closed later aborts nothing.
  fd = connect_loopback(server_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, post_text("/v1/completions", first)));
  const std::string answer = receive(fd, std::chrono::seconds(120), [](const std::string& s) {
    return s.find("\"usage\"") != std::string::npos && s.back() == '}';
  });
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Metrics m = scrape(*server_);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.aborted, aborted);
}

}  // namespace
}  // namespace troupe
