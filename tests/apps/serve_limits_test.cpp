// `troupe serve` at its limits, a real process on loopback (stories260K):
// - 1,100 connections against a server started under `prlimit --nofile=1024:1024`:
//   past --max-connections (derived from the limit) they get 503 naming it, /health
//   still answers within 2 s, and once they close new requests are served;
// - the descriptors taken away from a running server (prlimit --pid): accepting fails
//   with EMFILE (logged), waiting clients get a 503, and once descriptors are back the
//   server accepts again (RESTinio's own acceptor stopped for good at the first error);
// - a body over --max-body-bytes gets 413 from its Content-Length before one byte of it is
//   sent, headers over the limit 431, bytes that are not HTTP 400, each the OpenAI error
//   envelope, and the requests before it on the connection are answered first;
// - a POST past the cap still sending its body is read to its end and gets its 503.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/raw_socket.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing::connect_loopback;
using testing::send_some;

/// Everything the server sends until it closes (or `timeout`).
std::string read_to_close(int fd, std::chrono::milliseconds timeout) {
  std::string got;
  char buf[8192];
  for (auto end = Clock::now() + timeout; Clock::now() < end;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

int status_of(const std::string& response) {
  std::smatch m;
  static const std::regex re("^HTTP/1\\.1 (\\d{3}) ");
  return std::regex_search(response, m, re) ? std::stoi(m[1]) : -1;
}

json body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? json() : json::parse(response.substr(at + 4), nullptr, false);
}

Result<apps::http::Response> get(const ServeProcess& s, const std::string& path, std::chrono::seconds t = 2s) {
  return apps::http::request("127.0.0.1", s.port(), "GET", path, "", {}, {}, t);
}

Result<apps::http::Response> complete(const ServeProcess& s) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};
  return apps::http::request("127.0.0.1", s.port(), "POST", "/v1/completions", body.dump(),
                             {{"Content-Type", "application/json"}}, {}, 30s);
}

/// The value of a /metrics line starting with `name` (-1 when absent).
double metric(const ServeProcess& s, const std::string& name) {
  auto m = get(s, "/metrics", 5s);
  if (!m.ok() || m->status != 200) return -1;
  std::istringstream in(m->body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

/// This test process may hold more than 1,100 sockets.
void raise_own_descriptor_limit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

TEST(ServeLimits, HealthAnswersThroughElevenHundredConnectionsUnderAThousandDescriptors) {
  raise_own_descriptor_limit();
  ServeProcess serve({"--disable-log-stats"}, "", {"/usr/bin/prlimit", "--nofile=1024:1024", "--"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  const double cap = metric(serve, "troupe:http_max_connections");
  EXPECT_EQ(cap, 768) << "1024 less the 256 kept for the rest of the process";
  const auto t0 = Clock::now();
  std::vector<int> idle;
  for (int k = 0; k < 1100; ++k) {
    const int fd = connect_loopback(serve.port());
    ASSERT_GE(fd, 0) << "connection " << k;
    idle.push_back(fd);
  }
  // During: /health answers within 2 s (a reserved place past the cap), a request is
  // refused naming the limit.
  for (int k = 0; k < 5; ++k) {
    auto h = get(serve, "/health");
    ASSERT_TRUE(h.ok()) << h.status().to_string() << "\n" << serve.log();
    EXPECT_EQ(h->status, 200);
    std::this_thread::sleep_for(200ms);
  }
  auto refused = complete(serve);
  ASSERT_TRUE(refused.ok()) << refused.status().to_string();
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_NE(refused->body.find("--max-connections 768"), std::string::npos) << refused->body;
  EXPECT_GT(metric(serve, "troupe:http_connections_refused_total{reason=\"max_connections\"}"), 300);
  // After: once they close, requests are served again.
  for (int fd : idle) ::close(fd);
  int status = 0;
  for (auto end = Clock::now() + 20s; Clock::now() < end && status != 200; std::this_thread::sleep_for(100ms)) {
    auto r = complete(serve);
    status = r.ok() ? r->status : -1;
  }
  EXPECT_EQ(status, 200) << serve.log();
  auto h = get(serve, "/health");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, 200);
  // The refusals are logged at most once a second.
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LE(count(serve.log(), "(--max-connections 768)"), static_cast<size_t>(seconds) + 2) << serve.log();
}

// A client past the cap that is still sending its body when the 503 is written (a POST
// in pieces, as HTTP clients write headers and body apart) is not reset: every piece is
// taken and the 503 is read after (a plain close with its bytes unread made the kernel
// reset the connection: a broken pipe on the next piece, the 503 lost).
TEST(ServeLimits, APostPastTheCapIsReadToItsEndAndGetsIts503) {
  ServeProcess serve({"--disable-log-stats", "--max-connections", "2"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  const int held[2] = {connect_loopback(serve.port()), connect_loopback(serve.port())};
  ASSERT_GE(held[0], 0);
  ASSERT_GE(held[1], 0);
  const std::string piece(12 << 10, 'x');
  for (int round = 0; round < 8; ++round) {
    const int fd = connect_loopback(serve.port());
    ASSERT_GE(fd, 0);
    const std::string head = fmt::format(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        4 * piece.size());
    ASSERT_EQ(send_some(fd, head), head.size());
    for (int k = 0; k < 4; ++k) {
      std::this_thread::sleep_for(30ms);  // the server has read the head and answered by now
      EXPECT_EQ(send_some(fd, piece), piece.size()) << "round " << round << ", piece " << k << ": "
                                                    << std::strerror(errno);
    }
    const std::string answer = read_to_close(fd, 5000ms);
    EXPECT_EQ(status_of(answer), 503) << "round " << round << ": " << answer;
    EXPECT_NE(answer.find("--max-connections 2"), std::string::npos) << answer;
    ::close(fd);
  }
  for (int fd : held) ::close(fd);
}

/// The soft and hard RLIMIT_NOFILE of `pid` (from /proc).
std::pair<std::string, std::string> open_file_limit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream words(line.substr(14));
    std::string soft, hard;
    words >> soft >> hard;
    return {soft, hard};
  }
  return {"", ""};
}

int prlimit_pid(pid_t pid, const std::string& soft, const std::string& hard) {
  return std::system(fmt::format("/usr/bin/prlimit --pid {} --nofile={}:{}", pid, soft, hard).c_str());
}

TEST(ServeLimits, TheServerAcceptsAgainAfterItRanOutOfDescriptors) {
  if (::geteuid() != 0) GTEST_SKIP() << "lowering another process's descriptor limit needs root";
  ServeProcess serve({"--disable-log-stats"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  const auto [soft, hard] = open_file_limit(serve.pid());
  ASSERT_FALSE(soft.empty());
  const size_t open_now = static_cast<size_t>(std::distance(
      std::filesystem::directory_iterator("/proc/" + std::to_string(serve.pid()) + "/fd"),
      std::filesystem::directory_iterator{}));
  const std::string tight = std::to_string(open_now + 6);
  ASSERT_EQ(prlimit_pid(serve.pid(), tight, hard), 0);  // the soft limit only: raising a hard one back needs CAP_SYS_RESOURCE
  std::vector<int> clients;
  for (int k = 0; k < 40; ++k) {
    const int fd = connect_loopback(serve.port());
    if (fd >= 0) clients.push_back(fd);
  }
  // Waiting clients past the descriptors hear why (the spare descriptor makes room to tell them).
  size_t told = 0;
  for (int fd : clients) {
    const std::string got = read_to_close(fd, 100ms);
    if (status_of(got) == 503 && got.find("out of file descriptors") != std::string::npos) ++told;
  }
  EXPECT_GT(told, 0u);
  for (int fd : clients) ::close(fd);
  ASSERT_EQ(prlimit_pid(serve.pid(), soft, hard), 0);
  // The accept loop was re-armed: the server answers again within 2 s.
  bool healthy = false;
  for (auto end = Clock::now() + 2s; Clock::now() < end && !healthy; std::this_thread::sleep_for(50ms)) {
    auto h = get(serve, "/health", 1s);
    healthy = h.ok() && h->status == 200;
  }
  EXPECT_TRUE(healthy) << serve.log();
  auto r = complete(serve);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(serve.log().find("accepting a connection failed: Too many open files"), std::string::npos) << serve.log();
  EXPECT_GT(metric(serve, "troupe:http_accept_errors_total"), 0);
}

class ServeRequestLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve_ = std::make_unique<ServeProcess>(std::vector<std::string>{"--disable-log-stats"});
    healthy_ = serve_->wait_healthy();
  }
  static void TearDownTestSuite() { serve_.reset(); }
  void SetUp() override { ASSERT_TRUE(healthy_) << serve_->log(); }

  /// Sends `bytes` on a fresh connection and reads until the server closes it.
  static std::string exchange(const std::string& bytes, bool half_close = false) {
    const int fd = connect_loopback(serve_->port());
    EXPECT_GE(fd, 0);
    send_some(fd, bytes);
    if (half_close) ::shutdown(fd, SHUT_WR);
    std::string got = read_to_close(fd, 5000ms);
    ::close(fd);
    return got;
  }

  static inline std::unique_ptr<ServeProcess> serve_;
  static inline bool healthy_ = false;
};

TEST_F(ServeRequestLimits, ABodyOverTheLimitGets413FromItsContentLengthBeforeItIsSent) {
  // 4 MiB: between --max-body-bytes (1 MiB) and the 8 MiB at which RESTinio used to close.
  const auto t0 = Clock::now();
  const std::string got = exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n\r\n");
  EXPECT_LT(Clock::now() - t0, 3s) << "the answer waited for a body that was never sent";
  EXPECT_EQ(status_of(got), 413) << got;
  const json j = body_of(got);
  ASSERT_TRUE(j.is_object()) << got;
  EXPECT_EQ(j["error"]["code"], 413);
  EXPECT_NE(j["error"]["message"].get<std::string>().find("1048576 bytes (--max-body-bytes)"), std::string::npos);
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
}

TEST_F(ServeRequestLimits, AChunkedBodyOverTheLimitGets413) {
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk(256 << 10, 'x');
  for (int k = 0; k < 6; ++k) req += fmt::format("{:x}\r\n{}\r\n", chunk.size(), chunk);
  const std::string got = exchange(req);
  EXPECT_EQ(status_of(got), 413) << got.substr(0, 300);
}

TEST_F(ServeRequestLimits, HeadersOverTheLimitGet431) {
  const std::string got = exchange("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100 << 10, 'a') +
                                   "\r\n\r\n");
  EXPECT_EQ(status_of(got), 431) << got.substr(0, 300);
  const json j = body_of(got);
  ASSERT_TRUE(j.is_object()) << got.substr(0, 300);
  EXPECT_EQ(j["error"]["code"], 431);
}

TEST_F(ServeRequestLimits, BytesThatAreNotHttpGet400) {
  const std::string got = exchange("HELLO THERE\r\n\r\n");
  EXPECT_EQ(status_of(got), 400) << got;
  const json j = body_of(got);
  ASSERT_TRUE(j.is_object()) << got;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("Malformed HTTP request"), std::string::npos) << got;
}

TEST_F(ServeRequestLimits, TheRequestsBeforeARefusedOneAreAnsweredFirst) {
  const std::string got = exchange(
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
  const size_t first = got.find("HTTP/1.1 200");
  ASSERT_NE(first, std::string::npos) << got;
  const size_t second = got.find("HTTP/1.1 200", first + 1);
  ASSERT_NE(second, std::string::npos) << got;
  const size_t refusal = got.find("HTTP/1.1 413", second + 1);
  EXPECT_NE(refusal, std::string::npos) << got;
}

TEST_F(ServeRequestLimits, AHalfClosedClientIsAnsweredByTheRoutesWithoutAModelToo) {
  const std::string got = exchange("GET /version HTTP/1.1\r\nHost: x\r\n\r\n", /*half_close=*/true);
  EXPECT_EQ(status_of(got), 200) << got;
  EXPECT_NE(got.find("\"version\""), std::string::npos) << got;
}

TEST_F(ServeRequestLimits, TheRefusalsAreCountedInMetrics) {
  exchange("HELLO THERE\r\n\r\n");
  EXPECT_GE(metric(*serve_, "troupe:http_requests_refused_total{status=\"400\"}"), 1);
}

}  // namespace
}  // namespace troupe::tests
