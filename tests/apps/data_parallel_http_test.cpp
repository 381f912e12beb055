// `troupe serve --data-parallel-size 2` as a black box: greedy output is token for token a
// single replica's whichever replica serves (pinned with X-data-parallel-rank or routed),
// /metrics labels every replica's series (vLLM's engine label) under troupe: and vllm:
// names, bad pins are clear 400s, and a replica whose node process is killed fails only its
// own requests, with an error naming it, while the other keeps serving and /health names
// the lost one.
#include <dirent.h>
#include <signal.h>

#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

const std::string kModel = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";

struct Completion {
  int status = 0;
  std::vector<int64_t> token_ids;
  std::string body;
};

Completion complete(const ServeProcess& s, const std::string& prompt, int max_tokens, std::optional<int> pin = {},
                    std::string raw_pin = "") {
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                         {"return_token_ids", true}, {"ignore_eos", true}};
  apps::http::Headers headers = {{"Content-Type", "application/json"}};
  if (pin) headers.push_back({"X-data-parallel-rank", std::to_string(*pin)});
  if (!raw_pin.empty()) headers.push_back({"X-data-parallel-rank", raw_pin});
  auto r = apps::http::request("127.0.0.1", s.port(), "POST", "/v1/completions", body.dump(), headers, {},
                               std::chrono::seconds(120));
  Completion out;
  if (!r.ok()) return out;
  out.status = r->status;
  out.body = r->body;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (out.status == 200 && j.is_object()) out.token_ids = j["choices"][0]["token_ids"].get<std::vector<int64_t>>();
  return out;
}

std::string get(const ServeProcess& s, const std::string& path, int* status = nullptr) {
  auto r = apps::http::request("127.0.0.1", s.port(), "GET", path, "", {}, {}, std::chrono::seconds(30));
  if (!r.ok()) return "";
  if (status) *status = r->status;
  return r->body;
}

double metric(const std::string& text, const std::string& name, int engine, const std::string& extra = "") {
  const std::regex re("^" + name + R"(\{engine=")" + std::to_string(engine) + R"(",)" + extra +
                      R"(model_name="[^"]*"(,[^}]*)?\} (\S+)$)");
  std::smatch m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, m, re)) return std::stod(m[2]);
  return -1;
}

/// The pid of the local node process the server started for replica `replica` (its
/// --port-file is port.<index>; one rank per replica here).
pid_t local_node_of(int replica) {
  DIR* d = opendir("/proc");
  pid_t found = -1;
  const std::string needle = "/port." + std::to_string(replica);
  while (dirent* e = d ? readdir(d) : nullptr) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(" node ") != std::string::npos && cmd.find(needle + " ") != std::string::npos &&
        cmd.find(std::to_string(::getpid())) == std::string::npos)
      found = pid;
  }
  if (d) closedir(d);
  return found;
}

TEST(DataParallelHttp, GreedyOutputIsOneReplicasWhicheverServesAndMetricsArePerReplica) {
  ServeProcess single({});
  ServeProcess dp({"--data-parallel-size", "2"});
  ASSERT_TRUE(single.wait_healthy()) << single.log();
  ASSERT_TRUE(dp.wait_healthy()) << dp.log();
  // A shared opening of several 16-token blocks, so that routed requests can hit a cache.
  const std::string opening =
      "Once upon a time, there was a little girl named Lily. She liked to play in the park with her ball. "
      "One day, she saw a big dog near the tree. ";
  const std::vector<std::string> prompts = {opening + "The dog", opening + "Lily said", opening + "They went"};
  for (const auto& p : prompts) {
    const Completion want = complete(single, p, 24);
    ASSERT_EQ(want.status, 200) << want.body;
    for (std::optional<int> pin : {std::optional<int>(0), std::optional<int>(1), std::optional<int>()}) {
      const Completion got = complete(dp, p, 24, pin);
      ASSERT_EQ(got.status, 200) << got.body;
      EXPECT_EQ(got.token_ids, want.token_ids) << p << " on replica " << (pin ? std::to_string(*pin) : "(routed)");
    }
  }
  const std::string text = get(dp, "/metrics");
  for (const char* prefix : {"vllm:", "troupe:"}) {
    for (int e = 0; e < 2; ++e) {
      // Each replica ran each prompt at least once when pinned to it.
      EXPECT_GE(metric(text, std::string(prefix) + "request_success_total", e, R"(finished_reason="length",)"), 3)
          << prefix << " engine " << e << "\n" << text;
      EXPECT_GE(metric(text, std::string(prefix) + "num_requests_running", e), 0) << prefix << " engine " << e;
    }
  }
  // Three prompts sharing their first blocks on two replicas, each run three times: hits.
  EXPECT_GT(metric(text, "vllm:prefix_cache_hits_total", 0) + metric(text, "vllm:prefix_cache_hits_total", 1), 0);
}

TEST(DataParallelHttp, BadPinsAreClearErrors) {
  ServeProcess dp({"--data-parallel-size", "2"});
  ASSERT_TRUE(dp.wait_healthy()) << dp.log();
  Completion c = complete(dp, "Once upon a time", 4, 2);
  EXPECT_EQ(c.status, 400) << c.body;
  EXPECT_NE(c.body.find("X-data-parallel-rank 2 is out of range: the server runs 2 replica(s)"), std::string::npos)
      << c.body;
  EXPECT_NE(c.body.find(R"("param":"X-data-parallel-rank")"), std::string::npos) << c.body;
  c = complete(dp, "Once upon a time", 4, {}, "one");
  EXPECT_EQ(c.status, 400) << c.body;
  EXPECT_NE(c.body.find("must be a replica index"), std::string::npos) << c.body;
}

// A stream pinned to `replica`; `on_first` runs once the first chunk has arrived. Returns the
// whole SSE text.
std::string stream(const ServeProcess& s, int replica, int max_tokens, const std::function<void()>& on_first) {
  nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0},
                         {"ignore_eos", true}, {"stream", true}};
  std::string text;
  bool first = true;
  auto r = apps::http::request(
      "127.0.0.1", s.port(), "POST", "/v1/completions", body.dump(),
      {{"Content-Type", "application/json"}, {"X-data-parallel-rank", std::to_string(replica)}},
      [&](std::string_view piece) {
        text.append(piece);
        if (first && text.find("data: ") != std::string::npos) {
          first = false;
          on_first();
        }
        return true;
      },
      std::chrono::seconds(120));
  return text;
}

TEST(DataParallelHttp, ALostReplicaFailsOnlyItsRequestsAndIsRoutedAround) {
  ServeProcess dp({"--data-parallel-size", "2"});
  ASSERT_TRUE(dp.wait_healthy()) << dp.log();
  const pid_t node1 = local_node_of(1);
  ASSERT_GT(node1, 0) << "no local node process of replica 1";
  // A stream on replica 1 loses its node after the first chunk; one on replica 0 runs on.
  std::string on_zero;
  std::thread other([&] { on_zero = stream(dp, 0, 300, [] {}); });
  const std::string lost = stream(dp, 1, 400, [&] { ::kill(node1, SIGKILL); });
  const auto lost_at = std::chrono::steady_clock::now();
  other.join();
  EXPECT_NE(lost.find(R"("error")"), std::string::npos) << lost;
  EXPECT_NE(lost.find("replica 1"), std::string::npos) << lost;
  EXPECT_EQ(on_zero.find(R"("error")"), std::string::npos) << on_zero;
  EXPECT_NE(on_zero.find("[DONE]"), std::string::npos) << on_zero;
  // /health stays 200 and names the lost replica; new requests all go to replica 0.
  int status = 0;
  std::string health;
  while (std::chrono::steady_clock::now() - lost_at < std::chrono::seconds(1)) {
    health = get(dp, "/health", &status);
    if (health.find("unhealthy_replicas") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200) << health;
  EXPECT_NE(health.find(R"("replica":1)"), std::string::npos) << health;
  for (int i = 0; i < 6; ++i) {
    const Completion c = complete(dp, "The little dog " + std::to_string(i), 4);
    EXPECT_EQ(c.status, 200) << c.body;
  }
  const Completion pinned = complete(dp, "Once upon a time", 4, 1);
  EXPECT_EQ(pinned.status, 503) << pinned.body;
  EXPECT_NE(pinned.body.find("replica 1 (X-data-parallel-rank) does not serve"), std::string::npos) << pinned.body;
}

}  // namespace
}  // namespace troupe::tests
