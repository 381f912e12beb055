// A node's port against hostile bytes, with a real `troupe node` serving a real
// head (`troupe serve --nodes`): a crafted CAF 0.17.6 BASP header announcing a
// ~4 GB payload (which made the middleman allocate gigabytes before the gate
// saw the peer), 100 MB of random garbage, a connection that never speaks, and
// a peer that knows the secret but sends an oversized frame. Each is dropped
// with a log line, the node's RSS (/proc) stays within a few MB, the head's
// /health stays 200 throughout, and the head still gets the same completion.
// The head's stats port stands behind the same guard (its refusals counted in
// /metrics). A flood of a thousand half-open connections from another address
// does not keep a peer with the secret out (it passes within 2 s) and costs at
// most one log line a second per cause; and no process has a port but its
// guard (CAF listens on none), so a local process without the secret finds no
// other door.
//
// The link handshake and the BASP header are written here from their
// descriptions (net/link_guard.hpp, net/basp_frames.hpp), not with the
// code under test.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <atomic>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/proc_sockets.hpp"
#include "tests/raw_socket.hpp"
#include "tests/run_troupe.hpp"
#include "node_process.hpp"
#include "net/crypto.hpp"
#include "serve_process.hpp"

namespace troupe::tests {
namespace {

using testing::connect_from;
using testing::closed_within;
using testing::connect_loopback;
using testing::read_exact;
using testing::send_some;

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

/// VmRSS of `pid` in kB (0 if unreadable).
long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> value) return value;
    std::getline(in, key);
  }
  return 0;
}

/// A BASP header as CAF 0.17.6 serializes it: operation, two pad bytes, flags,
/// payload_len, operation_data, source_actor, dest_actor; integers big-endian.
std::string basp_header(uint8_t op, uint32_t payload_len, uint64_t dest_actor) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<char>(payload_len >> (24 - 8 * i));
  for (int i = 0; i < 8; ++i) h[24 + i] = static_cast<char>(dest_actor >> (56 - 8 * i));
  return h;
}

template <class Process>
bool log_shows(const Process& p, const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(10)) {
  for (auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    if (p.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// `count` connections from 127.0.0.2 that never speak, each renewed when the node drops it,
/// until destroyed.
class HandshakeFlood {
 public:
  HandshakeFlood(int port, size_t count) {
    thread_ = std::thread([this, port, count] {
      std::vector<int> fds;
      while (!stop_) {
        while (fds.size() < count && !stop_) {
          const int fd = connect_from("127.0.0.2", port);
          if (fd < 0) break;
          fds.push_back(fd);
          ++opened_;
        }
        std::vector<pollfd> p;
        for (int fd : fds) p.push_back({fd, POLLIN, 0});
        ::poll(p.data(), p.size(), 50);
        std::vector<int> keep;
        char buf[256];
        for (auto& q : p) {
          if ((q.revents & (POLLHUP | POLLERR)) || ((q.revents & POLLIN) && ::recv(q.fd, buf, sizeof buf, 0) == 0)) {
            ::close(q.fd);
            continue;
          }
          keep.push_back(q.fd);
        }
        fds = std::move(keep);
      }
      for (int fd : fds) ::close(fd);
    });
  }
  ~HandshakeFlood() {
    stop_ = true;
    thread_.join();
  }
  size_t opened() const { return opened_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<size_t> opened_{0};
  std::thread thread_;
};

/// Refusal lines of a node log by (second, cause): each must be at most one.
std::map<std::pair<std::string, std::string>, int> refusal_lines_per_second(const std::string& log) {
  static const std::regex time_re("(\\d\\d:\\d\\d:\\d\\d)");
  std::map<std::pair<std::string, std::string>, int> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::string cause;
    if (line.find("no handshake slot free") != std::string::npos || line.find("(handshake_slots)") != std::string::npos)
      cause = "slots";
    else if (line.find("did not finish the link handshake") != std::string::npos ||
             line.find("(handshake_timeout)") != std::string::npos)
      cause = "timeout";
    else if (line.find("refused") != std::string::npos)
      cause = "other";
    else
      continue;
    std::smatch m;
    if (std::regex_search(line, m, time_re)) ++out[{m[1], cause}];
  }
  return out;
}

class NodeGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_path_ = fmt::format("/tmp/troupe_node_guard_{}_secret", ::getpid());
    std::ofstream(secret_path_) << secret_ << "\n";
    node_ = std::make_unique<NodeProcess>(secret_path_, 0, std::vector<std::string>{"TROUPE_LINK_HANDSHAKE_TIMEOUT_S=2"});
    ASSERT_TRUE(node_->wait_listening()) << node_->log();
    stats_port_ = free_port();
    serve_ = std::make_unique<ServeProcess>(std::vector<std::string>{
        "--nodes", node_->address(), "--secret-file", secret_path_, "--disable-log-stats", "--stats-port",
        std::to_string(stats_port_)});
    ASSERT_TRUE(serve_->wait_healthy()) << serve_->log();
    greedy_ = complete();
    ASSERT_FALSE(greedy_.empty());
    rss_before_ = rss_kb(node_->pid());
    ASSERT_GT(rss_before_, 0);
  }
  void TearDown() override { std::remove(secret_path_.c_str()); }

  std::string complete() {
    json body = {{"model", "stories260K.gguf"}, {"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
    auto r = apps::http::request("127.0.0.1", serve_->port(), "POST", "/v1/completions", body.dump(),
                                 {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
    if (!r.ok() || r->status != 200) return "";
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
  }

  /// /health answers 200 every time it is asked over `span` (the head's heartbeat
  /// timeout is 2 s: a node that stalled would be marked lost within it).
  void expect_healthy_for(std::chrono::seconds span) {
    for (auto end = Clock::now() + span; Clock::now() < end;) {
      auto h = apps::http::request("127.0.0.1", serve_->port(), "GET", "/health", "", {}, {}, std::chrono::seconds(5));
      ASSERT_TRUE(h.ok()) << "the head went down";
      ASSERT_EQ(h->status, 200) << h->body;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  /// The node's memory grew by at most a few MB; prints the figures.
  void expect_rss_bounded(const char* what) {
    const long after = rss_kb(node_->pid());
    std::printf("[ node RSS ] %s: before %ld kB, after %ld kB (+%ld kB)\n", what, rss_before_, after,
                after - rss_before_);
    EXPECT_LT(after - rss_before_, 16 * 1024) << what;
  }

  /// The client side of the link handshake, proving `secret`; the connected socket or -1.
  int pass_handshake(const std::string& secret) {
    const int fd = connect_loopback(node_->port());
    std::string challenge;
    if (fd < 0 || !read_exact(fd, &challenge, 8 + 1 + 32) || challenge.compare(0, 8, "troupeLK") != 0) return -1;
    const std::string nonce_s = challenge.substr(9), nonce_c(32, 'c');
    const auto proof = crypto::hmac_sha256(secret, "troupe link v1 client" + nonce_s + nonce_c);
    send_some(fd, "troupeLK" + nonce_c + std::string(reinterpret_cast<const char*>(proof.data()), proof.size()));
    std::string verdict;
    if (!read_exact(fd, &verdict, 33) || verdict[0] != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  const std::string secret_ = "guarded";
  std::string secret_path_;
  std::unique_ptr<NodeProcess> node_;
  std::unique_ptr<ServeProcess> serve_;
  std::string greedy_;
  long rss_before_ = 0;
  int stats_port_ = 0;
};

TEST_F(NodeGuard, ACraftedBaspHeaderWithAHugeLengthCostsTheNodeNothing) {
  const int fd = connect_loopback(node_->port());
  ASSERT_GE(fd, 0);
  // A valid client_handshake header (no actors) announcing 4 GB - 256 bytes, then 1 MB of it.
  send_some(fd, basp_header(1, 0xFFFFFF00u, 0) + std::string(1 << 20, '\0'));
  EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10))) << "the node kept the connection";
  ::close(fd);
  expect_healthy_for(std::chrono::seconds(3));
  expect_rss_bounded("crafted BASP header");
  EXPECT_TRUE(log_shows(*node_, "does not speak the troupe link handshake")) << node_->log();
  EXPECT_EQ(complete(), greedy_);
}

TEST_F(NodeGuard, OneHundredMegabytesOfRandomGarbageAreDropped) {
  const int fd = connect_loopback(node_->port());
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(42);  // test data, not a secret
  std::string chunk(1 << 20, '\0');
  for (auto& c : chunk) c = static_cast<char>(rng());
  size_t sent = 0;
  for (int i = 0; i < 100; ++i) {
    const size_t n = send_some(fd, chunk);
    sent += n;
    if (n < chunk.size()) break;
  }
  EXPECT_LT(sent, size_t{100} << 20) << "the node read all 100 MB";
  EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10)));
  ::close(fd);
  expect_healthy_for(std::chrono::seconds(3));
  expect_rss_bounded("100 MB of garbage");
  EXPECT_TRUE(log_shows(*node_, "refused a peer")) << node_->log();
  EXPECT_EQ(complete(), greedy_);
}

TEST_F(NodeGuard, AConnectionThatNeverPassesTheHandshakeIsDroppedAtItsDeadline) {
  const int fd = connect_loopback(node_->port());
  ASSERT_GE(fd, 0);
  std::string challenge;
  ASSERT_TRUE(read_exact(fd, &challenge, 41));
  // TROUPE_LINK_HANDSHAKE_TIMEOUT_S=2 on the node.
  EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10))) << "a silent peer was kept";
  ::close(fd);
  EXPECT_TRUE(log_shows(*node_, "did not finish the link handshake within 2000 ms")) << node_->log();
  expect_healthy_for(std::chrono::seconds(1));
}

TEST_F(NodeGuard, AWrongProofIsRefusedBeforeAnyBaspByte) {
  EXPECT_EQ(pass_handshake("not the secret"), -1);
  EXPECT_TRUE(log_shows(*node_, "refused a peer (127.0.0.1:")) << node_->log();
  EXPECT_NE(node_->log().find("wrong secret"), std::string::npos) << node_->log();
}

TEST_F(NodeGuard, APeerWithTheSecretStillCannotSendAFrameAboveTheCap) {
  const int fd = pass_handshake(secret_);
  ASSERT_GE(fd, 0) << node_->log();
  // A direct_message header (to actor 1) announcing 4 GB - 256 bytes.
  send_some(fd, basp_header(2, 0xFFFFFF00u, 1) + std::string(1 << 20, '\0'));
  EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10))) << "the node kept the connection";
  ::close(fd);
  expect_healthy_for(std::chrono::seconds(3));
  expect_rss_bounded("oversized frame after the handshake");
  EXPECT_TRUE(log_shows(*node_, "dropped: the remote side sent a BASP message of 4294967040 bytes (at most 67108864)"))
      << node_->log();
  EXPECT_EQ(complete(), greedy_);
}

TEST_F(NodeGuard, TheHeadsStatsPortDropsACraftedHeaderToo) {
  const int fd = connect_loopback(stats_port_);
  ASSERT_GE(fd, 0) << serve_->log();
  send_some(fd, basp_header(1, 0xFFFFFF00u, 0) + std::string(1 << 20, '\0'));
  EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10))) << "the head kept the connection";
  ::close(fd);
  expect_healthy_for(std::chrono::seconds(2));
  EXPECT_TRUE(log_shows(*serve_, "stat logger refused a peer (127.0.0.1:")) << serve_->log();
  // The refusal is counted in the head's /metrics, by cause.
  auto m = apps::http::request("127.0.0.1", serve_->port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(5));
  ASSERT_TRUE(m.ok() && m->status == 200);
  const std::string line = "troupe:link_refusals_total{cause=\"handshake_refused\"} ";
  const size_t at = m->body.find(line);
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GE(std::stod(m->body.substr(at + line.size())), 1.0) << m->body.substr(at, 80);
  EXPECT_EQ(complete(), greedy_);
}

TEST_F(NodeGuard, AFloodOfAThousandHalfOpenConnectionsDoesNotKeepAPeerWithTheSecretOut) {
  if (connect_from("127.0.0.2", node_->port()) < 0) GTEST_SKIP() << "cannot bind 127.0.0.2";
  HandshakeFlood flood(node_->port(), 1000);
  while (flood.opened() < 1000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past the 2 s deadline: the flood renews itself
  // The handshake with the secret, from 127.0.0.1, passes within 2 s.
  auto t0 = Clock::now();
  const int fd = pass_handshake(secret_);
  const auto took = Clock::now() - t0;
  EXPECT_GE(fd, 0) << node_->log();
  EXPECT_LT(took, std::chrono::seconds(2));
  if (fd >= 0) ::close(fd);
  // So does troupe's own dialer (a whole actor system connecting, as a head does).
  t0 = Clock::now();
  const auto r = troupe::testing::run_troupe("plugins --node " + node_->address() + " --secret-file " + secret_path_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::printf("[ flood ] %zu connections opened; the handshake passed in %lld ms, plugins --node took %lld ms\n",
              flood.opened(), static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  expect_healthy_for(std::chrono::seconds(2));
  for (const auto& [key, lines] : refusal_lines_per_second(node_->log()))
    EXPECT_LE(lines, 1) << lines << " refusal lines of cause " << key.second << " at " << key.first << "\n"
                        << node_->log().substr(0, 4000);
  EXPECT_TRUE(log_shows(*node_, "no handshake slot free")) << node_->log().substr(0, 4000);
}

TEST_F(NodeGuard, ALocalProcessFindsNoDoorButTheGuards) {
  // The node listens on its guard's port only: CAF has no port and no Unix socket.
  EXPECT_EQ(troupe::testing::listening_tcp_ports(node_->pid()), std::set<int>{node_->port()});
  EXPECT_TRUE(troupe::testing::listening_unix_sockets(node_->pid()).empty());
  // The head on its HTTP port and its stats guard, nothing for CAF (its link to the node
  // is a socket pair, never a loopback port).
  EXPECT_EQ(troupe::testing::listening_tcp_ports(serve_->pid()), (std::set<int>{serve_->port(), stats_port_}));
  EXPECT_TRUE(troupe::testing::listening_unix_sockets(serve_->pid()).empty());
  // What a local process can send to every door it finds: the 64-byte BASP frame (a header
  // announcing 4 GB, and another) that grew a node by 1.3 GB through CAF's loopback port.
  std::atomic<bool> stop{false};
  std::atomic<int> not_ok{0};
  std::thread health([&] {
    while (!stop) {
      auto h = apps::http::request("127.0.0.1", serve_->port(), "GET", "/health", "", {}, {}, std::chrono::seconds(5));
      if (!h.ok() || h->status != 200) ++not_ok;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<int> sent;
  for (int port : troupe::testing::listening_tcp_ports(node_->pid())) {
    for (int k = 0; k < 20; ++k) {
      const int fd = connect_loopback(port);
      ASSERT_GE(fd, 0);
      send_some(fd, basp_header(1, 0xFFFFFF00u, 0) + basp_header(2, 0xFFFFFF00u, 1));
      sent.push_back(fd);
    }
  }
  for (int fd : sent) {
    EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10)));  // at the handshake deadline (2 s) at the latest
    ::close(fd);
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  stop = true;
  health.join();
  EXPECT_EQ(not_ok, 0) << "the head answered /health with something else than 200";
  const long after = rss_kb(node_->pid());
  EXPECT_LT(after - rss_before_, 64 * 1024) << "the node grew by " << (after - rss_before_) << " kB";
  EXPECT_EQ(complete(), greedy_);
}

}  // namespace
}  // namespace troupe::tests
