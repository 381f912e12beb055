// Mutual TLS between real processes on loopback: a `troupe node` with
// --tls-cert/--tls-key/--tls-ca (certificates from the real `troupe certs`)
// serves a head (`troupe generate --nodes`, `troupe plugins --node`) that
// holds a certificate of the same cluster CA, with the output of one process.
// A head with a certificate of another CA, or without TLS, is refused before
// it can spawn anything, with a log line on both sides; bad certificate files
// stop start-up with one line naming the file; a node on a non-loopback
// address may run with TLS alone.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "node_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using troupe::testing::run_troupe;

const std::string kModel = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";

template <class Process>
bool log_shows(const Process& p, const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(10)) {
  for (auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    if (p.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

class NodeTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/troupe_node_tls_test_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    auto a = run_troupe("certs --out " + dir_ + "/a --hosts 127.0.0.1,127.0.0.2,head");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = run_troupe("certs --out " + dir_ + "/b --hosts 127.0.0.1,head");
    ASSERT_EQ(b.exit_code, 0) << b.err;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  /// --tls-cert/--tls-key of `host` in `cluster`, and the CA of `ca_cluster`.
  static std::vector<std::string> tls_args(const std::string& cluster, const std::string& host,
                                           const std::string& ca_cluster = "") {
    const std::string d = dir_ + "/" + cluster + "/";
    return {"--tls-cert", d + host + ".pem", "--tls-key", d + host + "-key.pem", "--tls-ca",
            dir_ + "/" + (ca_cluster.empty() ? cluster : ca_cluster) + "/ca.pem"};
  }
  static std::string flags(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args) s += " " + a;
    return s;
  }

  static inline std::string dir_;
};

TEST_F(NodeTls, ARankOnATlsNodeGivesTheSameOutputAsInProcess) {
  NodeProcess node("", 0, {}, "127.0.0.1", tls_args("a", "127.0.0.1"));
  ASSERT_TRUE(node.wait_listening()) << node.log();
  EXPECT_TRUE(log_shows(node, "TLS: peers need a certificate of")) << node.log();
  const std::string gen = "generate " + kModel + " -p 'Once upon a time' -n 32 --json --threads 1";
  auto local = run_troupe(gen);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto remote = run_troupe(gen + " --nodes " + node.address() + flags(tls_args("a", "head")));
  ASSERT_EQ(remote.exit_code, 0) << remote.err << node.log();
  EXPECT_EQ(json::parse(remote.out)["token_ids"], json::parse(local.out)["token_ids"]);
  EXPECT_NE(remote.err.find("connected to node " + node.address()), std::string::npos) << remote.err;
  EXPECT_TRUE(log_shows(node, "node accepted a peer")) << node.log();
  EXPECT_TRUE(log_shows(node, "llama model: 5 layers")) << "the model did not load in the node process";
  // Another client of the same cluster: the node's own report.
  auto report = run_troupe("plugins --json --node " + node.address() + flags(tls_args("a", "head")));
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(json::parse(report.out)["node"], node.address());
}

// Two TLS-only nodes on two "hosts" (127.0.0.2 and 127.0.0.1): their ranks meet over TCP,
// every connection proving a fresh world secret the head sent over the TLS links.
TEST_F(NodeTls, TlsOnlyNodesOnTwoHostsServeTensorParallelOverTcp) {
  const std::string prompts = dir_ + "/prompts";
  std::ofstream(prompts) << "Once upon a time\nThe little dog\nLily and Tom went to\n";
  NodeProcess other_host("", 0, {}, "127.0.0.2", tls_args("a", "127.0.0.2"));
  NodeProcess here("", 0, {}, "127.0.0.1", tls_args("a", "127.0.0.1"));
  ASSERT_TRUE(other_host.wait_listening()) << other_host.log();
  ASSERT_TRUE(here.wait_listening()) << here.log();
  const std::string gen = "generate " + kModel + " --prompts-file " + prompts + " -n 24 --threads 1";
  auto one = run_troupe(gen);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_FALSE(one.out.empty());
  auto two = run_troupe(gen + " --tensor-parallel-size 2 --nodes " + other_host.address() + "," + here.address() +
                            flags(tls_args("a", "head")),
                        "env -u TROUPE_CPU_COMM -u TROUPE_CLUSTER_SECRET_FILE");
  ASSERT_EQ(two.exit_code, 0) << two.err << other_host.log() << here.log();
  EXPECT_EQ(two.out, one.out);
  EXPECT_NE(two.err.find("ranks meet through communicator cpu-tcp:127.0.0.2:"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find("a fresh world secret"), std::string::npos) << two.err;
  // The ranks' own connections are TLS too (the node names its files to the platform).
  EXPECT_TRUE(log_shows(other_host, "connected to 1 rank(s) over TLS")) << other_host.log();
  EXPECT_TRUE(log_shows(here, "connected to 1 rank(s) over TLS")) << here.log();
}

TEST_F(NodeTls, HeadsOfAnotherCaOrWithoutTlsAreRefusedOnBothSides) {
  NodeProcess node("", 0, {"TROUPE_LINK_HANDSHAKE_TIMEOUT_S=2"}, "127.0.0.1", tls_args("a", "127.0.0.1"));
  ASSERT_TRUE(node.wait_listening()) << node.log();
  const std::string gen = "generate " + kModel + " -p hi -n 4 --threads 1 --nodes " + node.address();
  // A certificate of CA B, trusting CA A (whose certificate is no secret).
  auto other = run_troupe(gen + flags(tls_args("b", "head", "a")));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("refused the TLS connection"), std::string::npos) << other.err;
  EXPECT_TRUE(log_shows(node, "TLS handshake failed")) << node.log();
  EXPECT_NE(node.log().find("refused a peer"), std::string::npos) << node.log();
  // A head that trusts only CA B refuses the node's certificate itself.
  auto distrust = run_troupe(gen + flags(tls_args("b", "head")));
  EXPECT_EQ(distrust.exit_code, 1);
  EXPECT_NE(distrust.err.find("certificate verify failed"), std::string::npos) << distrust.err;
  // No TLS at all: the node waits for a TLS hello that never comes, and drops it at its deadline.
  auto plain = run_troupe(gen);
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("node 127.0.0.1"), std::string::npos) << plain.err;
  EXPECT_TRUE(log_shows(node, "did not finish the link handshake")) << node.log();
  EXPECT_EQ(node.log().find("node accepted a peer"), std::string::npos) << node.log();
  EXPECT_EQ(node.log().find("CPU worker"), std::string::npos) << "a refused peer got a worker";
}

TEST_F(NodeTls, BadCertificateFilesStopStartUpWithOneLineNamingTheFile) {
  const std::string d = dir_ + "/a/";
  auto missing = run_troupe("node --tls-cert " + d + "nope.pem --tls-key " + d + "127.0.0.1-key.pem --tls-ca " + d +
                            "ca.pem");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("--tls-cert: cannot read " + d + "nope.pem"), std::string::npos) << missing.err;
  auto wrong_key = run_troupe("node --tls-cert " + d + "127.0.0.1.pem --tls-key " + d + "head-key.pem --tls-ca " +
                              d + "ca.pem");
  EXPECT_EQ(wrong_key.exit_code, 1);
  EXPECT_NE(wrong_key.err.find("is not the key of the certificate"), std::string::npos) << wrong_key.err;
  auto half = run_troupe("node --tls-cert " + d + "127.0.0.1.pem");
  EXPECT_EQ(half.exit_code, 1);
  EXPECT_NE(half.err.find("go together"), std::string::npos) << half.err;
  auto gen = run_troupe("generate " + kModel + " -p hi -n 2 --tls-cert " + d + "head.pem --tls-key " + d +
                        "head-key.pem --tls-ca " + d + "missing-ca.pem");
  EXPECT_EQ(gen.exit_code, 1);
  EXPECT_NE(gen.err.find("--tls-ca: cannot read " + d + "missing-ca.pem"), std::string::npos) << gen.err;
}

TEST_F(NodeTls, ANonLoopbackNodeMayRunWithTlsAlone) {
  auto bare = run_troupe("node --host 0.0.0.0 --port 0");
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_NE(bare.err.find("needs --secret-file or TLS"), std::string::npos) << bare.err;
  NodeProcess node("", 0, {}, "0.0.0.0", tls_args("a", "127.0.0.1"));
  EXPECT_TRUE(node.wait_listening()) << node.log();
}

}  // namespace
}  // namespace troupe::tests
