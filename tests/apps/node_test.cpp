// Worker nodes as real processes on loopback: a rank on a `troupe node` gives
// the same output as in process; secrets are checked on both sides; a node
// reports its own plugins; a node killed (SIGKILL) or stopped (SIGSTOP)
// during a streaming request of `troupe serve` ends that request with an
// error within 10 s, /health names the lost node, the head stays up, and once
// the node is back at the same address the head serves again; a node given
// SIGTERM does the same, and exits 0.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "node_process.hpp"
#include "tests/run_troupe.hpp"
#include "serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kModel = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";

// The files the tests write (secrets, prompts), removed when the test process exits.
struct WrittenFiles {
  std::vector<std::string> paths;
  ~WrittenFiles() {
    for (const auto& p : paths) std::remove(p.c_str());
  }
};

std::string write_file(const std::string& name, const std::string& text) {
  static WrittenFiles written;
  const std::string path = fmt::format("/tmp/troupe_node_test_{}_{}", ::getpid(), name);
  std::ofstream(path) << text << "\n";
  written.paths.push_back(path);
  return path;
}

using troupe::testing::CmdResult;
using troupe::testing::run_troupe;

/// Polls `log()` (bounded) until it contains `text`.
template <class Process>
bool log_shows(const Process& p, const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(10)) {
  for (auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    if (p.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(Node, ARankOnANodeGivesTheSameOutputAsInProcess) {
  const std::string secret = write_file("secret_a", "correct horse battery staple");
  NodeProcess node(secret);
  ASSERT_TRUE(node.wait_listening()) << node.log();
  EXPECT_NE(node.log().find("Node listening on " + node.address()), std::string::npos) << node.log();
  const std::string gen = "generate " + kModel + " -p 'Once upon a time' -n 32 --json --threads 1";
  auto local = run_troupe(gen);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto remote = run_troupe(gen + " --nodes " + node.address() + " --secret-file " + secret);
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(json::parse(remote.out)["token_ids"], json::parse(local.out)["token_ids"]);
  EXPECT_EQ(json::parse(remote.out)["text"], json::parse(local.out)["text"]);
  EXPECT_NE(remote.err.find("connected to node " + node.address()), std::string::npos) << remote.err;
  EXPECT_TRUE(log_shows(node, "node accepted a peer")) << node.log();
  EXPECT_TRUE(log_shows(node, "llama model: 5 layers")) << "the model did not load in the node process";
}

TEST(Node, AWrongSecretIsRefusedAndLoggedOnBothSides) {
  const std::string secret = write_file("secret_b", "the right one");
  const std::string wrong = write_file("wrong_b", "a wrong one");
  NodeProcess node(secret);
  ASSERT_TRUE(node.wait_listening()) << node.log();
  auto r = run_troupe("generate " + kModel + " -p hi -n 4 --nodes " + node.address() + " --secret-file " + wrong);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("refused the connection: wrong secret"), std::string::npos) << r.err;
  EXPECT_TRUE(log_shows(node, "refused a peer")) << node.log();
  EXPECT_NE(node.log().find("wrong secret"), std::string::npos) << node.log();
  EXPECT_EQ(node.log().find("CPU worker"), std::string::npos) << "a refused peer got a worker";
  auto none = run_troupe("plugins --node " + node.address());  // no secret at all
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("wrong secret"), std::string::npos) << none.err;
}

TEST(Node, ANonLoopbackNodeNeedsASecret) {
  auto r = run_troupe("node --host 0.0.0.0 --port 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("needs --secret-file"), std::string::npos) << r.err;
}

TEST(Node, ItLoadsItsOwnPluginsAndReportsThem) {
  const std::string secret = write_file("secret_c", "plugins");
  NodeProcess node(secret, 0,
                   {std::string("TROUPE_PLUGIN_PATH=") + TROUPE_BINARY_DIR + "/examples/plugins",
                    "TROUPE_PLUGINS=gpt2_model"});
  ASSERT_TRUE(node.wait_listening()) << node.log();
  EXPECT_TRUE(log_shows(node, "plugin gpt2_model loaded.")) << node.log();
  auto r = run_troupe("plugins --json --node " + node.address() + " --secret-file " + secret,
                      "env -u TROUPE_PLUGIN_PATH -u TROUPE_PLUGINS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = json::parse(r.out);
  EXPECT_EQ(report["node"], node.address());
  bool loaded = false;
  for (const auto& p : report["groups"]["troupe.general_plugins"])
    loaded |= p["name"] == "gpt2_model" && p["status"] == "loaded";
  EXPECT_TRUE(loaded) << report.dump(2);
  // The head chooses a node's platform; until one does, the node names its own pick.
  EXPECT_TRUE(report["platform"]["activated"].is_null()) << report.dump(2);
  EXPECT_EQ(report["platform"]["selected"], "cpu");
  // This process (no TROUPE_PLUGIN_PATH) never saw that plugin: the report is the node's.
  auto local = run_troupe("plugins --json", "env -u TROUPE_PLUGIN_PATH -u TROUPE_PLUGINS");
  ASSERT_EQ(local.exit_code, 0);
  EXPECT_EQ(local.out.find("gpt2_model"), std::string::npos);
}

// Ranks on node processes of two "hosts" (127.0.0.2 and 127.0.0.1: two loopback addresses)
// meet over TCP: the node of rank 0 makes the cpu-tcp id and listens on its own address;
// stories260K split in two (tensor parallel, then pipeline parallel) gives the greedy output of
// one process. Nodes of one host meet in shared memory, unless TROUPE_CPU_COMM=tcp.
TEST(NodeTcp, RanksOnTwoHostsMeetOverTcpAndGiveTheOutputOfOneProcess) {
  const std::string secret = write_file("secret_tcp", "tcp");
  const std::string prompts = write_file("prompts_tcp", "Once upon a time\nThe little dog\nLily and Tom went to");
  NodeProcess other_host(secret, 0, {}, "127.0.0.2"), here(secret), here_too(secret);
  ASSERT_TRUE(other_host.wait_listening()) << other_host.log();
  ASSERT_TRUE(here.wait_listening()) << here.log();
  ASSERT_TRUE(here_too.wait_listening()) << here_too.log();
  const std::string gen = "generate " + kModel + " --prompts-file " + prompts + " -n 24 --threads 1 --secret-file " +
                          secret + " ";
  auto one = run_troupe(gen);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_FALSE(one.out.empty());
  const std::string two_hosts = " --nodes " + other_host.address() + "," + here.address();
  for (const char* split : {"--tensor-parallel-size 2", "--pipeline-parallel-size 2"}) {
    SCOPED_TRACE(split);
    auto r = run_troupe(gen + split + two_hosts, "env -u TROUPE_CPU_COMM");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, one.out);
    EXPECT_NE(r.err.find("ranks meet through communicator cpu-tcp:127.0.0.2:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(nodes on several hosts)"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(log_shows(other_host, "communicator for 2 rank(s): cpu-tcp:127.0.0.2:")) << other_host.log();
  EXPECT_EQ(here.log().find("communicator for"), std::string::npos) << "rank 1's node made an id";
  // One host: shared memory, or TCP when asked for.
  const std::string one_host = " --tensor-parallel-size 2 --nodes " + here.address() + "," + here_too.address();
  auto shm = run_troupe(gen + one_host, "env -u TROUPE_CPU_COMM");
  ASSERT_EQ(shm.exit_code, 0) << shm.err;
  EXPECT_EQ(shm.out, one.out);
  EXPECT_NE(shm.err.find("ranks meet through communicator cpu-shm:"), std::string::npos) << shm.err;
  auto tcp = run_troupe(gen + one_host, "env TROUPE_CPU_COMM=tcp");
  ASSERT_EQ(tcp.exit_code, 0) << tcp.err;
  EXPECT_EQ(tcp.out, one.out);
  EXPECT_NE(tcp.err.find("ranks meet through communicator cpu-tcp:127.0.0.1:"), std::string::npos) << tcp.err;
  auto bad = run_troupe(gen + one_host, "env TROUPE_CPU_COMM=udp");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("TROUPE_CPU_COMM must be tcp"), std::string::npos) << bad.err;
}

/// `troupe serve` with its one rank on `node`, and what a streaming request sees.
class NodeFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = write_file("secret_fail", "failures");
    node_ = std::make_unique<NodeProcess>(secret_);
    ASSERT_TRUE(node_->wait_listening()) << node_->log();
    serve_ = std::make_unique<ServeProcess>(std::vector<std::string>{
        "--nodes", node_->address(), "--secret-file", secret_, "--disable-log-stats"});
    ASSERT_TRUE(serve_->wait_healthy()) << serve_->log();
    greedy_ = complete();
    ASSERT_FALSE(greedy_.empty());
  }

  /// A short greedy completion's text ("" on failure).
  std::string complete() {
    json body = {{"model", "stories260K.gguf"}, {"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
    auto r = apps::http::request("127.0.0.1", serve_->port(), "POST", "/v1/completions", body.dump(),
                                 {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
    if (!r.ok() || r->status != 200) return "";
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
  }

  /// Streams a long request; `on_first_event` runs once the first token arrived.
  /// Returns the stream's last data event and how long after the hook it came.
  std::pair<std::string, double> stream_and(const std::function<void()>& on_first_event) {
    json body = {{"model", "stories260K.gguf"}, {"prompt", "Once upon a time"}, {"max_tokens", 1800},
                 {"ignore_eos", true},          {"temperature", 0},                {"stream", true}};
    apps::http::SseParser parser;
    std::string last;
    bool hooked = false;
    Clock::time_point hooked_at;
    auto r = apps::http::request(
        "127.0.0.1", serve_->port(), "POST", "/v1/completions", body.dump(), {{"Content-Type", "application/json"}},
        [&](std::string_view bytes) {
          parser.feed(bytes, [&](std::string_view data) {
            if (data != "[DONE]") last = std::string(data);
            if (!hooked) {
              hooked = true;
              on_first_event();
              hooked_at = Clock::now();
            }
          });
          return true;
        },
        std::chrono::seconds(60));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) {
      EXPECT_EQ(r->status, 200) << r->body;
    }
    EXPECT_TRUE(hooked) << "no event arrived";
    if (!hooked) return {last, 0.0};
    return {last, std::chrono::duration<double>(Clock::now() - hooked_at).count()};
  }

  void expect_unhealthy_naming_the_node() {
    auto h = apps::http::request("127.0.0.1", serve_->port(), "GET", "/health", "", {}, {}, std::chrono::seconds(10));
    ASSERT_TRUE(h.ok()) << "the head went down";
    EXPECT_EQ(h->status, 503);
    EXPECT_NE(h->body.find("node " + node_->address()), std::string::npos) << h->body;
  }

  void expect_serving_again() {
    EXPECT_TRUE(serve_->wait_healthy(std::chrono::seconds(30))) << serve_->log();
    EXPECT_EQ(complete(), greedy_);
    EXPECT_NE(serve_->log().find("reconnected to node " + node_->address()), std::string::npos) << serve_->log();
  }

  std::string secret_;
  std::unique_ptr<NodeProcess> node_;
  std::unique_ptr<ServeProcess> serve_;
  std::string greedy_;
};

TEST_F(NodeFailure, AKilledNodeEndsTheStreamThenTheHeadReconnects) {
  auto [last, seconds] = stream_and([&] { node_->kill_now(SIGKILL); });
  EXPECT_NE(last.find("\"error\""), std::string::npos) << "the stream did not end with an error: " << last;
  EXPECT_NE(last.find("node " + node_->address()), std::string::npos) << last;
  EXPECT_LT(seconds, 10.0);
  expect_unhealthy_naming_the_node();
  node_->restart();
  ASSERT_TRUE(node_->wait_listening()) << node_->log();
  expect_serving_again();
}

TEST_F(NodeFailure, ANodeGivenSigtermLeavesAtOnceExitsZeroAndIsTakenBack) {
  auto [last, seconds] = stream_and([&] { node_->kill_now(SIGTERM); });
  EXPECT_NE(last.find("\"error\""), std::string::npos) << "the stream did not end with an error: " << last;
  EXPECT_NE(last.find("node " + node_->address()), std::string::npos) << last;
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(node_->wait_exit(std::chrono::seconds(10)), 0) << node_->log();
  EXPECT_NE(node_->log().find("Node stopping (SIGTERM)"), std::string::npos) << node_->log();
  expect_unhealthy_naming_the_node();
  node_->restart();
  ASSERT_TRUE(node_->wait_listening()) << node_->log();
  expect_serving_again();
}

TEST_F(NodeFailure, AStoppedNodeIsNoticedThroughHeartbeatsThenServesAgain) {
  auto [last, seconds] = stream_and([&] { node_->kill_now(SIGSTOP); });
  EXPECT_NE(last.find("\"error\""), std::string::npos) << "the stream did not end with an error: " << last;
  EXPECT_LT(seconds, 10.0);
  expect_unhealthy_naming_the_node();
  node_->kill_now(SIGCONT);
  expect_serving_again();
}

// Tensor parallel 2 over two nodes: losing either node fails the requests in
// flight; once it is back, every rank is rebuilt (with a fresh communicator, made
// by rank 0's node as it is then). Over shared memory losing rank 1's node; over
// TCP losing rank 0's, whose new process makes the new id and listens.
struct SplitLoss {
  const char* comm;  // TROUPE_CPU_COMM of the head
  size_t lost;       // which node is killed: 0 hosts rank 0
};

class NodeFailureSplit : public ::testing::TestWithParam<SplitLoss> {};

TEST_P(NodeFailureSplit, ATensorParallelEngineRebuildsBothRanksAfterLosingANode) {
  const SplitLoss param = GetParam();
  ::setenv("TROUPE_CPU_COMM", param.comm, 1);  // this test's own process; the head inherits it
  const std::string secret = write_file("secret_split", "split");
  NodeProcess first(secret), second(secret);
  ASSERT_TRUE(first.wait_listening()) << first.log();
  ASSERT_TRUE(second.wait_listening()) << second.log();
  ServeProcess serve({"--nodes", first.address() + "," + second.address(), "--secret-file", secret,
                      "--tensor-parallel-size", "2", "--disable-log-stats"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  EXPECT_NE(serve.log().find(std::string("ranks meet through communicator cpu-") + param.comm), std::string::npos)
      << serve.log();
  auto complete = [&] {
    json body = {{"model", "stories260K.gguf"}, {"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
    auto r = apps::http::request("127.0.0.1", serve.port(), "POST", "/v1/completions", body.dump(),
                                 {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
    return r.ok() && r->status == 200 ? json::parse(r->body)["choices"][0]["text"].get<std::string>() : "";
  };
  const std::string before = complete();
  ASSERT_FALSE(before.empty());
  NodeProcess& lost = param.lost == 0 ? first : second;
  const std::string rank = std::to_string(param.lost);
  lost.kill_now(SIGKILL);
  bool named = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(10); !named && Clock::now() < deadline;) {
    auto h = apps::http::request("127.0.0.1", serve.port(), "GET", "/health", "", {}, {}, std::chrono::seconds(5));
    ASSERT_TRUE(h.ok()) << "the head went down";
    named = h->status == 503 && h->body.find("rank " + rank + " (node " + lost.address() + ")") != std::string::npos;
    if (!named) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(named) << serve.log();
  lost.restart();
  ASSERT_TRUE(lost.wait_listening()) << lost.log();
  EXPECT_TRUE(serve.wait_healthy(std::chrono::seconds(30))) << serve.log();
  EXPECT_EQ(complete(), before);
  EXPECT_NE(serve.log().find("rebuilding 2 rank(s)"), std::string::npos) << serve.log();
  if (param.lost == 0) {  // its log holds both processes' lines: an id at the start, one after the restart
    const std::string made = std::string("communicator for 2 rank(s): cpu-") + param.comm, log = first.log();
    const size_t at = log.find(made);
    EXPECT_TRUE(at != std::string::npos && log.find(made, at + 1) != std::string::npos)
        << "the restarted node of rank 0 made no id: " << log;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, NodeFailureSplit,
                         ::testing::Values(SplitLoss{"shm", 1}, SplitLoss{"tcp", 0}),
                         [](const ::testing::TestParamInfo<SplitLoss>& i) {
                           return std::string(i.param.comm) + "_losing_node_" + std::to_string(i.param.lost);
                         });

}  // namespace
}  // namespace troupe::tests
