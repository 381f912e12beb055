// The CPU communicator between hosts (TcpCommunicator) between real processes
// on loopback: tp_rank_main runs one rank each; rank 0 makes the cpu-tcp id in
// its own process and hands it to the others through a file. Every op with
// exact values on 2 and 4 ranks (buffers larger than the socket buffers, both
// sides sending at once), sums bit for bit equal to the shared-memory
// communicator's, a killed rank reported at once, a rank that never comes, a
// wrong token or world size refused on both sides; ranks that call different
// collectives and a receive of the wrong size, through either transport; and,
// in one process, the ids and the rule that rank 0 runs where its id was made,
// and strangers on rank 0's listener (silent, garbage, a wrong proof, an
// oversized hello, a rank with another secret) dropped while the ranks meet.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include <fstream>
#include <random>

#include "tests/raw_socket.hpp"
#include "runtime/config/engine_config.hpp"
#include "net/crypto.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/rank_processes.hpp"
#include "troupe/communicator.hpp"
#include "troupe/platform.hpp"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;
using testing::expect_all_ok;
using testing::last_result;
using testing::read_bytes;
using testing::run_comm;
using testing::TempDir;
using testing::Transport;
using testing::waited_seconds;

class TcpWorld : public ::testing::TestWithParam<int> {};

// all_reduce of 5 MB (two ranks: both send it at once; four: reduce-scatter then all-gather),
// all_gather, reduce_scatter, gather, broadcast, a 6 MB send/recv chain, groups (four ranks:
// two stage groups at once and a group of a group).
TEST_P(TcpWorld, EveryOperationGivesExactValues) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  const int world = GetParam();
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  expect_all_ok(run_comm(Transport::tcp, world, "all", ranks, {{"TROUPE_CPU_COMM_TIMEOUT_S", "60"}}, 120));
}

// Values of many magnitudes, so the order of the additions shows in the bits: every rank gets
// the same bits, and the same as through shared memory (sums in rank order 0..W-1).
TEST_P(TcpWorld, SumsAreBitForBitThoseOfSharedMemory) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  const int world = GetParam();
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  TempDir dir;
  const std::string tcp_out = dir.path() + "/tcp", shm_out = dir.path() + "/shm";
  expect_all_ok(run_comm(Transport::tcp, world, "sums", ranks, {{"TROUPE_CPU_COMM_TIMEOUT_S", "60"}}, 120, tcp_out));
  expect_all_ok(run_comm(Transport::shm, world, "sums", ranks, {{"TROUPE_CPU_COMM_TIMEOUT_S", "60"}}, 120, shm_out));
  const std::vector<char> reference = read_bytes(shm_out + ".r0");
  ASSERT_EQ(reference.size(), (1001 + 1'000'003 + 300'001) * sizeof(float));
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<char> tcp = read_bytes(tcp_out + ".r" + std::to_string(r));
    const std::vector<char> shm = read_bytes(shm_out + ".r" + std::to_string(r));
    // all_reduce results are the same on every rank; reduce_scatter's block is each rank's own.
    const size_t reduced = (1001 + 1'000'003) * sizeof(float);
    ASSERT_EQ(tcp.size(), reference.size());
    EXPECT_TRUE(std::equal(tcp.begin(), tcp.end(), shm.begin())) << "tcp and shm differ";
    EXPECT_TRUE(std::equal(tcp.begin(), tcp.begin() + static_cast<std::ptrdiff_t>(reduced), reference.begin()))
        << "all_reduce differs from rank 0's";
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpWorld, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

TEST(TcpCommunicatorProcesses, AThirdRankSumsLikeSharedMemoryToo) {
  // Three ranks split 1,000,003 floats unevenly in reduce-scatter then all-gather.
  ASSERT_NE(testing::cpu_platform(), nullptr);
  TempDir dir;
  for (Transport t : {Transport::tcp, Transport::shm})
    expect_all_ok(run_comm(t, 3, "sums", {0, 1, 2}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "60"}}, 120,
                           dir.path() + (t == Transport::tcp ? "/tcp" : "/shm")));
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(read_bytes(dir.path() + "/tcp.r" + std::to_string(r)),
              read_bytes(dir.path() + "/shm.r" + std::to_string(r)))
        << "rank " << r;
}

TEST(TcpCommunicatorProcesses, AKilledRankIsReportedAtOnceAsUnavailable) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  auto exits = run_comm(Transport::tcp, 3, "kill", {0, 1, 2}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "120"}}, 60);
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_EQ(exits[2].code, -1) << exits[2].output;  // SIGKILL
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(exits[r].timed_out) << exits[r].output;
    const std::string result = last_result(exits[r].output);
    EXPECT_EQ(result.rfind("unavailable: rank 2 (127.0.0.1:", 0), 0u) << exits[r].output;
    EXPECT_NE(result.find("its connection to rank " + std::to_string(r) + " during all_reduce"), std::string::npos)
        << exits[r].output;
    EXPECT_LT(waited_seconds(exits[r].output), 10.0) << exits[r].output;
  }
}

TEST(TcpCommunicatorProcesses, ARankThatNeverReachesTheCollectiveFailsTheOthersAtTheTimeout) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  auto exits = run_comm(Transport::tcp, 3, "late", {0, 1, 2}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "2"}}, 60);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(exits[r].timed_out) << exits[r].output;
    EXPECT_EQ(last_result(exits[r].output), "unavailable: rank 2 did not reach the collective within 2 s")
        << exits[r].output;
    const double waited = waited_seconds(exits[r].output);
    EXPECT_GE(waited, 1.9) << exits[r].output;
    EXPECT_LT(waited, 6.0) << exits[r].output;
  }
}

TEST(TcpCommunicatorProcesses, ARankThatNeverComesFailsTheRendezvousAtTheTimeout) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  const auto t0 = Clock::now();
  auto exits = run_comm(Transport::tcp, 3, "all", {0, 1}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "2"}}, 60);  // rank 2 never starts
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0);
  ASSERT_EQ(exits.size(), 2u);
  const std::string r0 = last_result(exits[0].output), r1 = last_result(exits[1].output);
  EXPECT_EQ(r0.rfind("unavailable: rank(s) 2 did not join cpu communicator cpu-tcp:127.0.0.1:", 0), 0u) << r0;
  EXPECT_NE(r0.find("within 2 s"), std::string::npos) << r0;
  // Rank 1 hears that from rank 0, or (rank 0 descheduled) gives up at its own timeout.
  EXPECT_EQ(r1.rfind("unavailable: ", 0), 0u) << r1;
  EXPECT_TRUE(r1.find("rank 0 gave up: rank(s) 2 did not join") != std::string::npos ||
              r1.find("did not answer rank 1 within 2 s") != std::string::npos)
      << r1;
}

TEST(TcpCommunicatorProcesses, AWrongTokenIsRefusedOnBothSides) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  auto exits = run_comm(Transport::tcp, 2, "all", {0, 1}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "3"}}, 60, "", {{1, {"--tamper", "token"}}});
  ASSERT_EQ(exits.size(), 2u);
  const std::string r0 = last_result(exits[0].output), r1 = last_result(exits[1].output);
  EXPECT_EQ(r1.rfind("invalid_argument: cpu communicator cpu-tcp:127.0.0.1:", 0), 0u) << exits[1].output;
  EXPECT_NE(r1.find("refused rank 1: the communicator token does not match"), std::string::npos) << exits[1].output;
  // Rank 0 logs the refusal, keeps waiting for the right rank 1, and gives up at its timeout.
  EXPECT_NE(exits[0].output.find("refused rank 1: its communicator token does not match"), std::string::npos)
      << exits[0].output;
  EXPECT_EQ(r0.rfind("unavailable: rank(s) 1 did not join cpu communicator", 0), 0u) << r0;
  EXPECT_NE(r0.find("(1 other connection(s) refused)"), std::string::npos) << r0;
}

TEST(TcpCommunicatorProcesses, AnotherWorldSizeIsRefusedOnBothSides) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  auto exits = run_comm(Transport::tcp, 2, "all", {0, 1}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "30"}}, 60, "", {{1, {"--tamper", "world"}}});
  ASSERT_EQ(exits.size(), 2u);
  const std::string why = "rank 1 joined with a world of 3 ranks, rank 0 has 2: the ranks disagree on the world size";
  const std::string r0 = last_result(exits[0].output), r1 = last_result(exits[1].output);
  EXPECT_EQ(r0.rfind("invalid_argument: cpu communicator cpu-tcp:127.0.0.1:", 0), 0u) << r0;
  EXPECT_NE(r0.find("refused a rank: " + why), std::string::npos) << r0;
  EXPECT_EQ(r1.rfind("invalid_argument: cpu communicator cpu-tcp:127.0.0.1:", 0), 0u) << r1;
  EXPECT_NE(r1.find("refused rank 1: " + why), std::string::npos) << r1;
}

// stories260K over two pipeline stages of two tensor ranks (stage groups made with new_group):
// rank 0's logits of every step, bit for bit those of the same split over shared memory.
TEST(TcpCommunicatorProcesses, AModelSplitTwoByTwoGivesTheLogitsOfSharedMemoryBitForBit) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  TempDir dir;
  for (Transport t : {Transport::tcp, Transport::shm})
    expect_all_ok(testing::run_model(t, testing::stories_path(), 2, 2,
                                     dir.path() + (t == Transport::tcp ? "/tcp.bin" : "/shm.bin"), {"--steps", "4"},
                                     120));
  const std::vector<char> tcp = read_bytes(dir.path() + "/tcp.bin"), shm = read_bytes(dir.path() + "/shm.bin");
  ASSERT_GT(shm.size(), 16u);
  EXPECT_EQ(tcp, shm);
}

// ---------------------------------------------------------------------------------------
// Either transport: the same errors through shared memory and over TCP

class EitherTransport : public ::testing::TestWithParam<Transport> {};

TEST_P(EitherTransport, RanksThatCallDifferentCollectivesAllFail) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  auto exits = run_comm(GetParam(), 3, "mismatch", {0, 1, 2}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "30"}}, 60);
  for (size_t r = 0; r < exits.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(exits[r].timed_out) << exits[r].output;
    const std::string result = last_result(exits[r].output);
    // Over TCP rank 2 may learn it from rank 1's message or from rank 0's end; the others see
    // the other op.
    if (r < 2 || GetParam() == Transport::shm) {
      EXPECT_EQ(result.rfind("internal: cpu communicator: rank ", 0), 0u) << exits[r].output;
      EXPECT_NE(result.find("broadcast"), std::string::npos) << exits[r].output;
      EXPECT_NE(result.find("all_reduce"), std::string::npos) << exits[r].output;
    } else {
      EXPECT_NE(result, "ok") << exits[r].output;
    }
  }
}

TEST_P(EitherTransport, AReceiveOfAnotherSizeThanTheMessageIsAnError) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  auto exits = run_comm(GetParam(), 2, "size", {0, 1}, {{"TROUPE_CPU_COMM_TIMEOUT_S", "30"}}, 60);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(last_result(exits[0].output), "ok") << exits[0].output;
  EXPECT_EQ(last_result(exits[1].output),
            "internal: cpu communicator: rank 0 sent a message of 40 bytes, rank 1 expected 44")
      << exits[1].output;
}

INSTANTIATE_TEST_SUITE_P(Transports, EitherTransport, ::testing::Values(Transport::shm, Transport::tcp),
                         [](const ::testing::TestParamInfo<Transport>& i) {
                           return std::string(i.param == Transport::shm ? "shm" : "tcp");
                         });

// A cluster CA and 127.0.0.1's certificate from the real `troupe certs` in `certs`, and the
// ranks' environment that puts TLS on their connections (with this communicator timeout);
// empty when `troupe certs` failed.
std::map<std::string, std::string> tls_env(const std::string& certs, const std::string& timeout_s) {
  if (std::system((std::string(TROUPE_EXE) + " certs --out " + certs + " --hosts 127.0.0.1 >/dev/null").c_str()) != 0)
    return {};
  return {{"TROUPE_CPU_COMM_TIMEOUT_S", timeout_s},
          {"TROUPE_TLS_CERT_FILE", certs + "/127.0.0.1.pem"},
          {"TROUPE_TLS_KEY_FILE", certs + "/127.0.0.1-key.pem"},
          {"TROUPE_TLS_CA_FILE", certs + "/ca.pem"}};
}

// With TROUPE_TLS_CERT_FILE, TROUPE_TLS_KEY_FILE and TROUPE_TLS_CA_FILE (what `troupe node
// --tls-*` sets), every connection between ranks is mutual TLS (certificates from the real
// `troupe certs`), and every operation still gives exact values.
TEST(TcpCommunicatorProcesses, OverTlsEveryOperationGivesExactValues) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  TempDir dir;
  const std::string certs = dir.path() + "/certs";
  const std::map<std::string, std::string> env = tls_env(certs, "60");
  ASSERT_FALSE(env.empty()) << "troupe certs failed";
  for (int world : {2, 4}) {
    SCOPED_TRACE(world);
    std::vector<int> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back(r);
    auto exits = run_comm(Transport::tcp, world, "all", ranks, env, 120);
    expect_all_ok(exits);
    for (const auto& e : exits) EXPECT_NE(e.output.find("over TLS"), std::string::npos) << e.output;
  }
  // A bad file: rank 0 (which makes the id) fails with a line naming it.
  auto bad = env;
  bad["TROUPE_TLS_CA_FILE"] = certs + "/missing.pem";
  bad["TROUPE_CPU_COMM_TIMEOUT_S"] = "3";
  auto exits = run_comm(Transport::tcp, 2, "all", {0, 1}, bad, 10);  // rank 1 waits for an id that never comes
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_NE(exits[0].output.find("TROUPE_TLS_CA_FILE: cannot use " + certs + "/missing.pem"), std::string::npos)
      << exits[0].output;
  EXPECT_NE(exits[0].code, 0);
}

// A rank killed over TLS: the survivors' next writes go to a connection the kernel has
// reset. OpenSSL's own socket transport writes with write(2), whose SIGPIPE would end the
// survivors (tp_rank_main keeps SIGPIPE's default action, as an embedding application
// may); troupe's sends with MSG_NOSIGNAL, so they report the lost rank like plain TCP.
TEST(TcpCommunicatorProcesses, AKilledRankOverTlsIsReportedAsUnavailableNotBySigpipe) {
  ASSERT_NE(testing::cpu_platform(), nullptr);
  TempDir dir;
  const std::map<std::string, std::string> env = tls_env(dir.path() + "/certs", "120");
  ASSERT_FALSE(env.empty()) << "troupe certs failed";
  auto exits = run_comm(Transport::tcp, 3, "kill", {0, 1, 2}, env, 60);
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_EQ(exits[2].code, -1) << exits[2].output;  // SIGKILL
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(exits[r].timed_out) << exits[r].output;
    EXPECT_NE(exits[r].code, -1) << "killed by a signal:\n" << exits[r].output;
    EXPECT_NE(exits[r].output.find("over TLS"), std::string::npos) << exits[r].output;
    EXPECT_EQ(last_result(exits[r].output).rfind("unavailable: rank 2 (127.0.0.1:", 0), 0u) << exits[r].output;
  }
}

// ---------------------------------------------------------------------------------------
// In one process

TEST(TcpCommunicatorIds, MakeAListenerHereAndServeOneWorldWhoseRankZeroRunsHere) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  p.communicator_host = "127.0.0.1";
  auto id = platform->make_communicator_id(p);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  ASSERT_EQ(id->rfind("cpu-tcp:127.0.0.1:", 0), 0u) << *id;
  auto other = platform->make_communicator_id(p);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *id);  // fresh every time
  // The id's port listens.
  const std::string rest = id->substr(std::string("cpu-tcp:127.0.0.1:").size());
  const int port = std::stoi(rest.substr(0, rest.find(':')));
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << "nothing listens on " << port;
    ::close(fd);  // rank 0 refuses that stranger (it sends no hello) and goes on
  }
  // Both ranks in threads of this process: an all_reduce through the mesh.
  ::setenv("TROUPE_CPU_COMM_TIMEOUT_S", "20", 1);
  p.communicator_id = *id;
  Result<std::unique_ptr<DeviceCommunicator>> ranks[2] = {internal_error("unset"), internal_error("unset")};
  float values[2][3] = {{1, 2, 3}, {10, 20, 30}};
  Status sums[2];
  std::thread t1([&] {
    ranks[1] = platform->make_device_communicator(p, 1);
    if (ranks[1].ok()) sums[1] = (*ranks[1])->all_reduce(values[1], 3, DType::f32);
  });
  ranks[0] = platform->make_device_communicator(p, 0);
  if (ranks[0].ok()) sums[0] = (*ranks[0])->all_reduce(values[0], 3, DType::f32);
  t1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ranks[r].ok()) << ranks[r].status().to_string();
    EXPECT_TRUE(sums[r].ok()) << sums[r].to_string();
    EXPECT_EQ(values[r][0], 11.0f);
    EXPECT_EQ(values[r][2], 33.0f);
  }
  // An id serves one world: its listener was taken.
  auto again = platform->make_device_communicator(p, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(again.status().message().find("rank 0 must run in the process that made the id"), std::string::npos)
      << again.status().message();
  // Rank 0 of an id made elsewhere (here: a token this process never made).
  p.communicator_id = id->substr(0, id->rfind(':') + 1) + "0123456789abcdef0123456789abcdef";
  auto elsewhere = platform->make_device_communicator(p, 0);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_NE(elsewhere.status().message().find("the id was made in another process"), std::string::npos)
      << elsewhere.status().message();
  for (const char* bad : {"cpu-tcp:", "cpu-tcp:host:token", "cpu-tcp:host:99999:tok", "cpu-tcp:host:80:bad token",
                          "cpu-tcp::80:tok"}) {
    p.communicator_id = bad;
    auto r = platform->make_device_communicator(p, 1);
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << bad << ": " << r.status().to_string();
  }
  // A world of one needs no id; an address nobody can listen on is an error.
  p.tensor_parallel_size = 1;
  EXPECT_EQ(*platform->make_communicator_id(p), "");
  p.tensor_parallel_size = 2;
  p.communicator_host = "192.0.2.1";  // TEST-NET-1: not an address of this machine
  EXPECT_FALSE(platform->make_communicator_id(p).ok());
}


// ---------------------------------------------------------------------------------------
// Strangers on a listener (in one process, raw sockets): the handshake on the cluster secret
// (net/handshake.hpp, as platforms/cpu/tcp_trust.hpp sets it up), written here from its description.

std::string answer_for(const std::string& challenge, const std::string& secret) {
  const std::string nonce_s = challenge.substr(9, 32), nonce_c(32, 'n');
  const auto proof = crypto::hmac_sha256(secret, "troupe comm v1 client" + nonce_s + nonce_c);
  return "troupeCA" + nonce_c + std::string(reinterpret_cast<const char*>(proof.data()), proof.size());
}

// Ranks 0 and 1 of `p` meet (each in its own thread) and sum {1, 2} and {10, 20}.
void expect_two_ranks_meet(Platform* platform, const ParallelConfig& p) {
  Result<std::unique_ptr<DeviceCommunicator>> ranks[2] = {internal_error("unset"), internal_error("unset")};
  float values[2][2] = {{1, 2}, {10, 20}};
  Status sums[2];
  std::thread t1([&] {
    ranks[1] = platform->make_device_communicator(p, 1);
    if (ranks[1].ok()) sums[1] = (*ranks[1])->all_reduce(values[1], 2, DType::f32);
  });
  ranks[0] = platform->make_device_communicator(p, 0);
  if (ranks[0].ok()) sums[0] = (*ranks[0])->all_reduce(values[0], 2, DType::f32);
  t1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ranks[r].ok()) << ranks[r].status().to_string();
    EXPECT_TRUE(sums[r].ok()) << sums[r].to_string();
    EXPECT_EQ(values[r][1], 22.0f);
  }
}

TEST(TcpCommunicatorAuth, StrangersAreDroppedAndOnlyRanksThatProveTheSecretMeet) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  TempDir dir;
  const std::string right = dir.path() + "/secret", wrong = dir.path() + "/wrong";
  std::ofstream(right) << "the cluster secret\n";
  std::ofstream(wrong) << "another secret\n";
  ::setenv("TROUPE_CLUSTER_SECRET_FILE", right.c_str(), 1);
  ::setenv("TROUPE_CPU_COMM_TIMEOUT_S", "3", 1);  // the handshake deadline: min(10 s, this)
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  p.communicator_host = "127.0.0.1";
  auto id = platform->make_communicator_id(p);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  const std::string rest = id->substr(std::string("cpu-tcp:127.0.0.1:").size());
  const int port = std::stoi(rest.substr(0, rest.find(':')));

  // Nothing sits unread: a silent stranger gets the challenge, then is closed at the deadline
  // (before rank 0 even took its listener).
  const int silent = testing::connect_loopback(port);
  std::string challenge;
  ASSERT_TRUE(testing::read_exact(silent, &challenge, 8 + 1 + 32));
  EXPECT_EQ(challenge.substr(0, 8), "troupeCA");
  EXPECT_TRUE(testing::closed_within(silent, std::chrono::seconds(10))) << "a silent stranger was kept";
  ::close(silent);

  // 100 MB of garbage: 72 bytes are read, then the connection is closed.
  const int garbage = testing::connect_loopback(port);
  std::mt19937_64 rng(7);  // test data
  std::string chunk(1 << 20, '\0');
  for (auto& c : chunk) c = static_cast<char>(rng());
  size_t sent = 0;
  for (int i = 0; i < 100; ++i) {
    const size_t n = testing::send_some(garbage, chunk);
    sent += n;
    if (n < chunk.size()) break;
  }
  EXPECT_LT(sent, size_t{100} << 20) << "the listener read all 100 MB";
  EXPECT_TRUE(testing::closed_within(garbage, std::chrono::seconds(10)));
  ::close(garbage);

  // A wrong proof: refused (verdict 1), closed.
  const int guess = testing::connect_loopback(port);
  ASSERT_TRUE(testing::read_exact(guess, &challenge, 41));
  testing::send_some(guess, answer_for(challenge, "a guess"));
  std::string verdict;
  ASSERT_TRUE(testing::read_exact(guess, &verdict, 33));
  EXPECT_EQ(verdict[0], 1);
  EXPECT_TRUE(testing::closed_within(guess, std::chrono::seconds(10)));
  ::close(guess);

  // The right proof, then a hello announcing 4 GB: closed (hellos are at most 64 KiB).
  const int big = testing::connect_loopback(port);
  ASSERT_TRUE(testing::read_exact(big, &challenge, 41));
  testing::send_some(big, answer_for(challenge, "the cluster secret"));
  ASSERT_TRUE(testing::read_exact(big, &verdict, 33));
  EXPECT_EQ(verdict[0], 0);
  const auto server = crypto::hmac_sha256("the cluster secret",
                                          "troupe comm v1 server" + challenge.substr(9, 32) + std::string(32, 'n'));
  EXPECT_EQ(verdict.substr(1), std::string(reinterpret_cast<const char*>(server.data()), server.size()))
      << "the listener did not prove the secret";
  testing::send_some(big, std::string("\xff\xff\xff\xff") + std::string(1 << 16, 'x'));
  EXPECT_TRUE(testing::closed_within(big, std::chrono::seconds(10)));
  ::close(big);

  // A rank with another secret is refused with a clear error...
  ::setenv("TROUPE_CLUSTER_SECRET_FILE", wrong.c_str(), 1);
  p.communicator_id = *id;
  auto impostor = platform->make_device_communicator(p, 1);
  ASSERT_FALSE(impostor.ok());
  EXPECT_EQ(impostor.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(impostor.status().message().find("refused the connection: wrong cluster secret"), std::string::npos)
      << impostor.status().message();
  ::setenv("TROUPE_CLUSTER_SECRET_FILE", right.c_str(), 1);

  // ...and the ranks that know it still meet.
  expect_two_ranks_meet(platform, p);
  ::unsetenv("TROUPE_CLUSTER_SECRET_FILE");
}

// A head that reaches its nodes over TLS alone sends them a fresh world secret
// (parallel.communicator_secret) over those links: it, not the (absent) cluster secret, is
// what every connection proves.
TEST(TcpCommunicatorAuth, AWorldSecretFromTheConfigIsWhatConnectionsProve) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  ::unsetenv("TROUPE_CLUSTER_SECRET_FILE");
  ::setenv("TROUPE_CPU_COMM_TIMEOUT_S", "3", 1);
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  p.communicator_host = "127.0.0.1";
  p.communicator_secret = "a fresh world secret";
  auto id = platform->make_communicator_id(p);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  const std::string rest = id->substr(std::string("cpu-tcp:127.0.0.1:").size());
  const int port = std::stoi(rest.substr(0, rest.find(':')));
  // The empty key (what a node without a secret would prove) is refused.
  const int empty_key = testing::connect_loopback(port);
  std::string challenge, verdict;
  ASSERT_TRUE(testing::read_exact(empty_key, &challenge, 41));
  testing::send_some(empty_key, answer_for(challenge, ""));
  ASSERT_TRUE(testing::read_exact(empty_key, &verdict, 33));
  EXPECT_EQ(verdict[0], 1);
  ::close(empty_key);
  // So is a rank without the world secret...
  p.communicator_id = *id;
  ParallelConfig without = p;
  without.communicator_secret.clear();
  auto stranger = platform->make_device_communicator(without, 1);
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), StatusCode::invalid_argument) << stranger.status().to_string();
  // ...while ranks that have it meet.
  expect_two_ranks_meet(platform, p);
}

}  // namespace
}  // namespace troupe
