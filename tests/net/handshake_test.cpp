// The one handshake on the cluster secret (net/handshake), both sides over real
// sockets: a listener that proves the secret accepts and leaves what follows
// the answer in the stream; a wrong secret is refused on both sides; the two
// protocols (the link guard's, the collectives') do not accept each other's
// proofs; the wire format is the documented one (checked with proofs computed
// here); a silent listener is a timeout naming the handshake. Also the gates'
// challenges, framed I/O and the socket helpers.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "net/crypto.hpp"
#include "net/frames.hpp"
#include "net/handshake.hpp"
#include "net/socket.hpp"
#include "net/stream.hpp"

namespace troupe::net {
namespace {

using namespace std::chrono_literals;

const HandshakeSpec kLink{"troupeLK", "troupe link v1", "the troupe link handshake", "secret", "the link handshake",
                          "a hint", ""};
const HandshakeSpec kComm{"troupeCA", "troupe comm v1", "the troupe cpu communicator handshake", "cluster secret", "",
                          "a hint", " (a refusal hint)"};

/// Two connected non-blocking streams.
std::pair<Stream, Stream> stream_pair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  return {Stream(Socket(sv[0])), Stream(Socket(sv[1]))};
}

/// Drives the listening side until it is over or `limit` passes.
ServerHandshake::State drive(ServerHandshake& hs, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  auto state = hs.step(POLLOUT);
  while (state == ServerHandshake::State::running && Clock::now() < deadline) {
    pollfd p{hs.fd(), hs.events(), 0};
    if (!hs.ready()) ::poll(&p, 1, 50);
    state = hs.step(hs.ready() ? short(POLLIN) : p.revents);
  }
  return state;
}

struct Outcome {
  ServerHandshake::State state = ServerHandshake::State::running;
  std::string why;
  std::string after;  // what the listener read after the handshake
};

/// The listener (in a thread) with `server_secret` against a dialer with `client_secret`.
Status run_pair(const HandshakeSpec& server_spec, const std::string& server_secret,
                const HandshakeSpec& client_spec, const std::string& client_secret, Outcome* out) {
  auto [a, b] = stream_pair();
  std::thread listener([&, s = std::move(a)]() mutable {
    ServerHandshake hs(std::move(s), server_spec, server_secret);
    out->state = drive(hs, 5s);
    out->why = hs.why();
    if (out->state == ServerHandshake::State::accepted) {
      std::string hello(5, '\0');
      if (read_exact(hs.stream(), hello.data(), hello.size(), Clock::now() + 5s, "the dialer").ok())
        out->after = hello;
    }
  });
  Status st = client_handshake(b, client_spec, client_secret, Clock::now() + 5s, "the listener");
  if (st.ok()) st = write_exact(b, "hello", 5, Clock::now() + 5s, "the listener");
  if (!st.ok()) b.close();  // a dialer that gives up hangs up
  listener.join();
  return st;
}

TEST(Handshake, TheSameSecretIsAcceptedAndWhatFollowsStaysInTheStream) {
  Outcome o;
  Status st = run_pair(kLink, "the secret", kLink, "the secret", &o);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(o.state, ServerHandshake::State::accepted) << o.why;
  EXPECT_EQ(o.after, "hello");
}

TEST(Handshake, TheEmptySecretIsAKeyLikeAnyOther) {
  Outcome o;
  EXPECT_TRUE(run_pair(kComm, "", kComm, "", &o).ok());
  EXPECT_EQ(o.state, ServerHandshake::State::accepted) << o.why;
  Outcome refused;
  EXPECT_FALSE(run_pair(kComm, "a secret", kComm, "", &refused).ok());
  EXPECT_EQ(refused.state, ServerHandshake::State::refused);
}

TEST(Handshake, AWrongSecretIsRefusedOnBothSides) {
  Outcome o;
  Status st = run_pair(kComm, "the secret", kComm, "a guess", &o);
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_EQ(st.message(), "the listener refused the connection: wrong cluster secret (a refusal hint)");
  EXPECT_EQ(o.state, ServerHandshake::State::refused);
  EXPECT_EQ(o.why, "wrong cluster secret");
}

TEST(Handshake, TheTwoProtocolsDoNotAcceptEachOther) {
  Outcome o;
  Status st = run_pair(kLink, "s", kComm, "s", &o);
  EXPECT_EQ(st.code(), StatusCode::unavailable) << st.to_string();
  EXPECT_NE(st.message().find("does not speak the troupe cpu communicator handshake"), std::string::npos)
      << st.message();
  EXPECT_EQ(o.state, ServerHandshake::State::left) << o.why;  // the dialer hung up on its challenge
}

TEST(Handshake, TheWireFormatIsTheDocumentedOne) {
  auto [a, b] = stream_pair();
  std::thread listener([&, s = std::move(a)]() mutable {
    ServerHandshake hs(std::move(s), kLink, "guarded");
    EXPECT_EQ(drive(hs, 5s), ServerHandshake::State::accepted) << hs.why();
  });
  const auto deadline = Clock::now() + 5s;
  std::string challenge(kChallengeBytes, '\0');
  ASSERT_TRUE(read_exact(b, challenge.data(), challenge.size(), deadline, "it").ok());
  EXPECT_EQ(challenge.substr(0, 9), std::string("troupeLK") + '\1');
  const std::string nonce_s = challenge.substr(9), nonce_c(32, 'c');
  const auto proof = crypto::hmac_sha256("guarded", "troupe link v1 client" + nonce_s + nonce_c);
  const std::string answer = "troupeLK" + nonce_c + std::string(reinterpret_cast<const char*>(proof.data()), 32);
  ASSERT_TRUE(write_exact(b, answer.data(), answer.size(), deadline, "it").ok());
  std::string verdict(kVerdictBytes, '\0');
  ASSERT_TRUE(read_exact(b, verdict.data(), verdict.size(), deadline, "it").ok());
  EXPECT_EQ(verdict[0], 0);
  const auto server = crypto::hmac_sha256("guarded", "troupe link v1 server" + nonce_s + nonce_c);
  EXPECT_EQ(verdict.substr(1), std::string(reinterpret_cast<const char*>(server.data()), 32));
  listener.join();
}

TEST(Handshake, GarbageIsReadNoFurtherThanTheAnswer) {
  auto [a, b] = stream_pair();
  const std::string garbage(4096, 'x');
  size_t put = 0;
  ASSERT_EQ(b.write(garbage.data(), garbage.size(), &put), Stream::Io::done);
  ServerHandshake hs(std::move(a), kComm, "s");
  EXPECT_EQ(drive(hs, 5s), ServerHandshake::State::refused);
  EXPECT_EQ(hs.why(), "it does not speak the troupe cpu communicator handshake (another program, or another troupe "
                      "version)");
}

TEST(Handshake, ASilentListenerIsATimeoutNamingTheHandshake) {
  auto [a, b] = stream_pair();
  const auto t0 = Clock::now();
  Status st = client_handshake(b, kLink, "s", Clock::now() + 300ms, "the node 10.0.0.1:7000");
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_EQ(st.code(), StatusCode::unavailable);
  EXPECT_EQ(st.message(), "the node 10.0.0.1:7000 did not answer the link handshake in time");
  Status comm = client_handshake(b, kComm, "s", Clock::now() + 100ms, "rank 0 (h:1)");
  EXPECT_EQ(comm.message(), "rank 0 (h:1) did not answer in time");
}

TEST(Challenges, ANonceIsGoodOnceWithItsProof) {
  Challenges c;
  auto n = c.issue();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->size(), 64u);
  EXPECT_EQ(c.redeem(*n, nonce_proof("a guess", *n), "secret"), Challenges::Verdict::wrong_proof);
  EXPECT_EQ(c.redeem(*n, nonce_proof("secret", *n), "secret"), Challenges::Verdict::unknown_nonce);  // used up
  auto m = c.issue();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(c.redeem(*m, nonce_proof("secret", *m), "secret"), Challenges::Verdict::accepted);
  auto any = c.issue();
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(c.redeem(*any, "anything", ""), Challenges::Verdict::accepted);  // no secret: loopback only
}

TEST(Challenges, AtMost64AreOutstanding) {
  Challenges c;
  auto first = c.issue();
  ASSERT_TRUE(first.ok());
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(c.issue().ok());
  EXPECT_EQ(c.redeem(*first, nonce_proof("s", *first), "s"), Challenges::Verdict::unknown_nonce);
}

TEST(Challenges, TheProofIsTheHmacOfTheNonce) {
  // RFC 4231, test case 2.
  EXPECT_EQ(nonce_proof("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(SecretFile, FirstLineWithoutTrailingSpaceAndClearErrors) {
  const std::string dir = "/tmp/troupe_secret_file_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/s") << "the secret \t\nsecond line\n";
  std::ofstream(dir + "/empty") << "  \n";
  auto s = read_secret_file(dir + "/s");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "the secret");
  EXPECT_EQ(read_secret_file(dir + "/empty").status().message(), "the secret file " + dir + "/empty is empty");
  EXPECT_EQ(read_secret_file(dir + "/nope").status().code(), StatusCode::not_found);
  std::filesystem::remove_all(dir);
}

TEST(Frames, FieldsAndFramesRoundTripAndOversizedFramesAreRefused) {
  FieldWriter w;
  w.u32(7);
  w.u64(uint64_t{1} << 40);
  w.str("rank");
  FieldReader r(w.bytes());
  EXPECT_EQ(r.u32(), 7u);
  EXPECT_EQ(r.u64(), uint64_t{1} << 40);
  EXPECT_EQ(r.str(), "rank");
  EXPECT_TRUE(r.ok());
  FieldReader short_read(w.bytes().substr(0, 13));  // the string's length is cut short
  short_read.u32();
  short_read.u64();
  EXPECT_TRUE(short_read.good());
  EXPECT_EQ(short_read.str(), "");
  EXPECT_FALSE(short_read.good());

  auto [a, b] = stream_pair();
  const auto deadline = Clock::now() + 5s;
  ASSERT_TRUE(send_frame(a, "a body", deadline, "b").ok());
  auto got = receive_frame(b, 100, deadline, "a");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, "a body");
  ASSERT_TRUE(send_frame(a, std::string(101, 'x'), deadline, "b").ok());
  auto big = receive_frame(b, 100, deadline, "a", "hello");
  EXPECT_EQ(big.status().message(), "a sent a hello of 101 bytes (at most 100)");
  // Nothing of the refused body was read: it is all still there, then the end.
  a.close();
  std::string rest(101, '\0');
  ASSERT_TRUE(read_exact(b, rest.data(), rest.size(), deadline, "a").ok());
  EXPECT_EQ(rest, std::string(101, 'x'));
  char one = 0;
  Status closed = read_exact(b, &one, 1, deadline, "a");
  EXPECT_EQ(closed.message(), "a closed the connection");
}

TEST(Sockets, ListenConnectAcceptAndRefused) {
  uint16_t port = 0;
  auto l = listen_on("127.0.0.1", 0, &port);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  ASSERT_NE(port, 0);
  auto c = connect_to("127.0.0.1", port, Clock::now() + 5s, Retry::no);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto s = accept_until(l->get(), Clock::now() + 5s);
  ASSERT_TRUE(s.ok() && s->valid());
  EXPECT_EQ(peer_address(s->get()).rfind("127.0.0.1:", 0), 0u) << peer_address(s->get());
  auto local = local_host(c->get());
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(*local, "127.0.0.1");
  auto none = accept_next(l->get());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->valid());
  l->reset();  // nothing listens there any more
  const auto t0 = Clock::now();
  auto refused = connect_to("127.0.0.1", port, Clock::now() + 300ms, Retry::until_deadline);
  EXPECT_GE(Clock::now() - t0, 250ms);  // tried again until the deadline
  EXPECT_EQ(refused.status().code(), StatusCode::unavailable);
  EXPECT_EQ(refused.status().message(), "Connection refused");
  EXPECT_EQ(host_port("::1", 80), "[::1]:80");
}

}  // namespace
}  // namespace troupe::net
