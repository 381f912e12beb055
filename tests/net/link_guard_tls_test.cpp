// The link guard with mutual TLS (net/tls, net/stream, net/link_guard), on real
// loopback sockets: certificates from two cluster CAs made by the real
// `troupe certs`, a guard relaying to a plain echo server standing for CAF
// (it takes each link's inner end), and dial_link (or a raw OpenSSL client, or raw TCP) on the
// other side. A certificate of the cluster CA is accepted and relays BASP
// frames both ways; one of another CA, none at all, a plain TCP peer, a
// certificate that does not name the dialed host, and a TLS dialer at a plain
// guard are all refused; bad files give one-line errors naming them.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "net/link_guard.hpp"
#include "net/tls.hpp"
#include "tests/raw_socket.hpp"
#include "tests/run_troupe.hpp"

namespace troupe::net {
namespace {

using namespace std::chrono_literals;
using troupe::testing::closed_within;
using troupe::testing::connect_loopback;
using troupe::testing::read_exact;
using troupe::testing::send_some;

/// A BASP header (CAF 0.17.6: op, 2 pad bytes, flags, payload_len big-endian, 3 x u64).
std::string basp_header(uint8_t op, uint32_t payload_len) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<char>(payload_len >> (24 - 8 * i));
  return h;
}

/// Stands for CAF: takes the inner end of every authenticated link and echoes its bytes back.
class EchoServer {
 public:
  ~EchoServer() {
    for (auto& t : threads_) t.join();
  }
  AdoptLink adopter() {
    return [this](Socket inner) -> Status {
      accepted_++;
      const int c = inner.release();
      ::fcntl(c, F_SETFL, ::fcntl(c, F_GETFL) & ~O_NONBLOCK);
      threads_.emplace_back([c] {
        char buf[65536];
        for (ssize_t r; (r = ::recv(c, buf, sizeof buf, 0)) > 0;) send_some(c, std::string(buf, r));
        ::close(c);
      });
      return {};
    };
  }
  int accepted() const { return accepted_; }

 private:
  std::atomic<int> accepted_{0};
  std::vector<std::thread> threads_;
};

class LinkTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/troupe_link_tls_test_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    // Two clusters: A (the guard's) and B (another CA), made by the real CLI.
    auto a = troupe::testing::run_troupe("certs --out " + dir_ + "/a --hosts 127.0.0.1,head");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = troupe::testing::run_troupe("certs --out " + dir_ + "/b --hosts 127.0.0.1,head");
    ASSERT_EQ(b.exit_code, 0) << b.err;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::shared_ptr<const TlsContext> ctx(const std::string& cluster, const std::string& host) {
    const std::string d = dir_ + "/" + cluster + "/";
    auto c = TlsContext::load({d + host + ".pem", d + host + "-key.pem", d + "ca.pem"});
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? *c : nullptr;
  }

  static LinkLimits limits() {
    LinkLimits l;
    l.handshake_timeout = 1500ms;
    return l;
  }

  /// A guard of cluster A (its certificate names 127.0.0.1) in front of the echo server.
  std::unique_ptr<LinkGuard> guard(LinkAuth auth) {
    auto g = LinkGuard::listen("127.0.0.1", 0, echo_.adopter(), std::move(auth), "test node", limits());
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return g.ok() ? std::move(*g) : nullptr;
  }

  /// Frames sent through a dialed link's inner end come back unchanged.
  static void expect_relays(Socket& inner) {
    const int fd = inner.get();
    ASSERT_GE(fd, 0);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const std::string frames = basp_header(6, 0) + basp_header(2, 100000) + std::string(100000, 'x') +
                               basp_header(1, 5) + "hello";
    ASSERT_EQ(send_some(fd, frames), frames.size());
    std::string back;
    ASSERT_TRUE(read_exact(fd, &back, frames.size()));
    EXPECT_EQ(back, frames);
    inner.reset();
  }

  static inline std::string dir_;
  EchoServer echo_;  // destroyed after the guards of a test (they close the links it echoes)
};

TEST_F(LinkTls, ACertificateOfTheClusterCaIsAcceptedAndRelaysBothWays) {
  auto g = guard(LinkAuth("", ctx("a", "127.0.0.1")));
  ASSERT_TRUE(g);
  auto port = dial_link("127.0.0.1", g->port(), LinkAuth("", ctx("a", "head")), "test node", 5s);
  ASSERT_TRUE(port.ok()) << port.status().to_string();
  expect_relays(*port);
}

TEST_F(LinkTls, TheSecretHandshakeRunsInsideTls) {
  auto g = guard(LinkAuth("the secret", ctx("a", "127.0.0.1")));
  ASSERT_TRUE(g);
  auto ok = dial_link("127.0.0.1", g->port(), LinkAuth("the secret", ctx("a", "head")), "test node", 5s);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  expect_relays(*ok);
  auto wrong = dial_link("127.0.0.1", g->port(), LinkAuth("another", ctx("a", "head")), "test node", 5s);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("wrong secret"), std::string::npos) << wrong.status().to_string();
}

TEST_F(LinkTls, ACertificateOfAnotherCaIsRefusedBeforeAnythingReachesTheInside) {
  auto g = guard(LinkAuth("", ctx("a", "127.0.0.1")));
  ASSERT_TRUE(g);
  // A dialer that trusts cluster A (its CA is public) but holds a certificate of CA B.
  const std::string a = dir_ + "/a/", b = dir_ + "/b/";
  auto intruder = TlsContext::load({b + "head.pem", b + "head-key.pem", a + "ca.pem"});
  ASSERT_TRUE(intruder.ok()) << intruder.status().to_string();
  auto r = dial_link("127.0.0.1", g->port(), LinkAuth("", *intruder), "test node", 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << r.status().to_string();
  // TLS 1.3: the guard's refusal reaches the dialer as an alert after its side of the handshake.
  EXPECT_NE(r.status().message().find("alert"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(echo_.accepted(), 0) << "a refused peer reached the inside";
}

TEST_F(LinkTls, AGuardWhoseCertificateIsOfAnotherCaIsRefusedByTheDialer) {
  auto g = guard(LinkAuth("", ctx("b", "127.0.0.1")));
  ASSERT_TRUE(g);
  auto r = dial_link("127.0.0.1", g->port(), LinkAuth("", ctx("a", "head")), "test node", 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("TLS handshake"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("certificate verify failed"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(echo_.accepted(), 0);
}

TEST_F(LinkTls, TheGuardsCertificateMustNameTheDialedHost) {
  auto g = guard(LinkAuth("", ctx("a", "127.0.0.1")));
  ASSERT_TRUE(g);
  // Its certificate names 127.0.0.1, not localhost.
  auto r = dial_link("localhost", g->port(), LinkAuth("", ctx("a", "head")), "test node", 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hostname mismatch"), std::string::npos) << r.status().to_string();
}

TEST_F(LinkTls, AClientWithoutACertificateIsRefused) {
  auto g = guard(LinkAuth("", ctx("a", "127.0.0.1")));
  ASSERT_TRUE(g);
  // A raw OpenSSL client that trusts CA A but presents no certificate.
  SSL_CTX* c = SSL_CTX_new(TLS_client_method());
  ASSERT_TRUE(c);
  ASSERT_EQ(SSL_CTX_load_verify_locations(c, (dir_ + "/a/ca.pem").c_str(), nullptr), 1);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  const int fd = connect_loopback(g->port());
  ASSERT_GE(fd, 0);
  SSL* s = SSL_new(c);
  SSL_set_fd(s, fd);
  // TLS 1.3: the client finishes its side; the refusal (an alert) comes with the first read.
  const int hs = SSL_connect(s);
  char buf[64];
  const int r = hs == 1 ? SSL_read(s, buf, sizeof buf) : hs;
  EXPECT_LE(r, 0) << "the guard sent data to a client without a certificate";
  EXPECT_TRUE(closed_within(fd, 5s));
  SSL_free(s);
  SSL_CTX_free(c);
  ::close(fd);
  ERR_clear_error();
  EXPECT_EQ(echo_.accepted(), 0);
}

TEST_F(LinkTls, APlainTcpPeerIsDroppedWithinTheHandshakeDeadline) {
  auto g = guard(LinkAuth("", ctx("a", "127.0.0.1")));
  ASSERT_TRUE(g);
  // Silent: waits for a challenge that a TLS guard never sends.
  const int silent = connect_loopback(g->port());
  ASSERT_GE(silent, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_within(silent, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);  // the 1.5 s deadline, not the test's bound
  ::close(silent);
  // Speaking: BASP-shaped bytes are not a ClientHello.
  const int talker = connect_loopback(g->port());
  ASSERT_GE(talker, 0);
  send_some(talker, basp_header(0, 1u << 31) + std::string(64, 'x'));
  EXPECT_TRUE(closed_within(talker, 5s));
  ::close(talker);
  // troupe's own plain dialer: refused too.
  auto plain = dial_link("127.0.0.1", g->port(), LinkAuth(""), "test node", 3s);
  EXPECT_FALSE(plain.ok());
  EXPECT_EQ(echo_.accepted(), 0);
}

TEST_F(LinkTls, ATlsDialerAtAPlainGuardIsRefusedOnBothSides) {
  auto g = guard(LinkAuth("s"));
  ASSERT_TRUE(g);
  auto r = dial_link("127.0.0.1", g->port(), LinkAuth("s", ctx("a", "head")), "test node", 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("TLS handshake"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(echo_.accepted(), 0);
}

TEST_F(LinkTls, BadFilesGiveOneLineErrorsNamingThem) {
  const std::string a = dir_ + "/a/";
  auto missing = TlsContext::load({a + "nope.pem", a + "head-key.pem", a + "ca.pem"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tls-cert: cannot read " + a + "nope.pem"), std::string::npos)
      << missing.status().message();
  const std::string garbage = dir_ + "/garbage.pem";
  std::ofstream(garbage) << "not a certificate\n";
  auto bad = TlsContext::load({garbage, a + "head-key.pem", a + "ca.pem"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tls-cert: " + garbage + " is not a PEM certificate"), std::string::npos)
      << bad.status().message();
  auto bad_ca = TlsContext::load({a + "head.pem", a + "head-key.pem", garbage});
  ASSERT_FALSE(bad_ca.ok());
  EXPECT_NE(bad_ca.status().message().find("--tls-ca: " + garbage), std::string::npos) << bad_ca.status().message();
  auto mismatch = TlsContext::load({a + "head.pem", a + "127.0.0.1-key.pem", a + "ca.pem"});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("is not the key of the certificate"), std::string::npos)
      << mismatch.status().message();
  auto partial = TlsContext::load({a + "head.pem", "", ""});
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("go together"), std::string::npos);
  for (const auto& s : {missing.status(), bad.status(), bad_ca.status(), mismatch.status(), partial.status()})
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  auto none = TlsContext::load({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

}  // namespace
}  // namespace troupe::net
