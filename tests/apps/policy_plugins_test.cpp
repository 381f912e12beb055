// The engine's pluggable policies end to end, through real `troupe serve`
// processes on loopback and the out-of-tree example plugins:
// - examples/priority_scheduler (`--scheduler-cls priority`): under load (more
//   requests than --max-num-seqs), higher-priority requests are served first;
// - examples/banned_words (`--logits-processors banned_words`): the words a
//   request bans via vllm_xargs never appear in its output, while a request
//   without arguments in the same batch gives exactly its greedy output alone;
// - the errors: unknown policy or processor names at start (listing the
//   registered ones), priorities under FCFS, malformed vllm_xargs.
// Needs TROUPE_TEST_MODEL (SmolLM2-135M GGUF) for the model runs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
namespace http = apps::http;
using Clock = std::chrono::steady_clock;

class PluginEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TROUPE_PLUGIN_PATH", (std::string(TROUPE_BINARY_DIR) + "/examples/plugins").c_str(), 1);
    // Not the example out-of-tree platform in the same directory: the CPU platform is built in.
    setenv("TROUPE_PLUGINS", "priority_scheduler,banned_words", 1);
  }
};
[[maybe_unused]] const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new PluginEnv);

const char* test_model() {
  const char* m = std::getenv("TROUPE_TEST_MODEL");
  return m && *m ? m : nullptr;
}

Result<http::Response> post(const ServeProcess& s, const json& body, const http::OnData& on_data = {}) {
  return http::request("127.0.0.1", s.port(), "POST", "/v1/completions", body.dump(),
                       {{"Content-Type", "application/json"}}, on_data, std::chrono::seconds(300));
}

/// troupe:num_requests_waiting from /metrics, or -1.
double waiting_requests(const ServeProcess& s) {
  auto r = http::request("127.0.0.1", s.port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(10));
  if (!r.ok() || r->status != 200) return -1;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("troupe:num_requests_waiting", 0) != 0) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

/// A streamed completion: its text and when its first and last pieces arrived.
struct Streamed {
  std::string text;
  Clock::time_point first, last;
  int status = 0;
  std::string error;
};

Streamed stream(const ServeProcess& s, json body) {
  body["stream"] = true;
  Streamed out;
  http::SseParser sse;
  auto r = post(s, body, [&](std::string_view bytes) {
    sse.feed(bytes, [&](std::string_view data) {
      if (data == "[DONE]") return;
      auto j = json::parse(data, nullptr, false);
      if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) return;
      const auto now = Clock::now();
      if (out.text.empty() && out.first == Clock::time_point{}) out.first = now;
      out.last = now;
      out.text += j["choices"][0].value("text", "");
    });
    return true;
  });
  if (!r.ok()) out.error = r.status().to_string();
  else out.status = r->status;
  return out;
}

std::string completion_text(const Result<http::Response>& r) {
  if (!r.ok() || r->status != 200) return "<failed: " + (r.ok() ? r->body : r.status().to_string()) + ">";
  return json::parse(r->body)["choices"][0]["text"].get<std::string>();
}

TEST(PriorityScheduler, HigherPriorityIsServedFirstUnderLoad) {
  if (!test_model()) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  ServeProcess s({"--scheduler-cls", "priority", "--max-num-seqs", "1", "--disable-log-stats"}, test_model());
  ASSERT_TRUE(s.wait_healthy()) << s.log();
  EXPECT_NE(s.log().find("scheduler policy: priority"), std::string::npos) << s.log();

  // The blocker holds the only seat, streaming, until released: then the client
  // hangs up and the server aborts it.
  std::atomic<bool> blocker_running{false}, release{false}, blocker_done{false};
  std::thread blocker([&] {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true},
                 {"temperature", 0}};
    (void)post(s, body, [&](std::string_view) {
      blocker_running = true;
      return !release.load();
    });
    blocker_done = true;
  });
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!blocker_running && !blocker_done && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(blocker_running.load()) << s.log();

  // Four requests arrive one after the other while the seat is taken; their
  // priorities are not in arrival order. vLLM semantics: lower value first.
  const std::vector<std::pair<std::string, int>> arrivals = {{"a", 5}, {"b", 1}, {"c", 3}, {"d", -2}};
  std::mutex mu;
  std::vector<std::string> finished;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const auto [name, priority] = arrivals[i];
    clients.emplace_back([&, name = name, priority = priority] {
      json body = {{"prompt", "Tell me about " + name}, {"max_tokens", 8}, {"temperature", 0},
                   {"priority", priority}};
      auto r = post(s, body);
      std::lock_guard lock(mu);
      if (!r.ok() || r->status != 200) failures.push_back(name + ": " + (r.ok() ? r->body : r.status().to_string()));
      finished.push_back(name);
    });
    // Wait until the server counts it as waiting, so arrival order is known.
    bool queued = false;
    while (!queued && !blocker_done && Clock::now() < deadline) {
      queued = waiting_requests(s) >= static_cast<double>(i + 1);
      if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(queued) << "request " << name << " was not counted as waiting (blocker done: " << blocker_done
                        << ")\n" << s.log();
  }
  EXPECT_FALSE(blocker_done.load()) << "the blocker ended before every request was queued";
  release = true;
  blocker.join();
  for (auto& t : clients) t.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(finished, (std::vector<std::string>{"d", "b", "c", "a"}))
      << "served in arrival order would be a, b, c, d";
}

TEST(PriorityScheduler, FcfsRefusesANonZeroPriority) {
  ServeProcess s({"--disable-log-stats"});  // stories260K, default policy
  ASSERT_TRUE(s.wait_healthy()) << s.log();
  auto r = post(s, {{"prompt", "Hello"}, {"max_tokens", 2}, {"priority", 1}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("does not use priorities"), std::string::npos) << r->body;
  auto zero = post(s, {{"prompt", "Hello"}, {"max_tokens", 2}, {"priority", 0}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->status, 200) << zero->body;
}

/// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(PriorityScheduler, APlatformsCheckAndUpdateConfigChoosesThePolicy) {
  // sched_cpu (tests/plugin_host/plugins) is the CPU platform, out of tree, and sets
  // scheduler_cls = "priority" in check_and_update_config; no --scheduler-cls is given.
  ScopedEnv path("TROUPE_PLUGIN_PATH", std::string(TROUPE_BINARY_DIR) + "/examples/plugins:" + TROUPE_BINARY_DIR +
                                           "/tests/plugin_host/plugins/sched_cpu");
  {
    ScopedEnv only("TROUPE_PLUGINS", "sched_cpu,priority_scheduler");
    ServeProcess s({"--disable-log-stats"});  // stories260K
    ASSERT_TRUE(s.wait_healthy()) << s.log();
    EXPECT_NE(s.log().find("Platform plugin sched_cpu is activated"), std::string::npos) << s.log();
    EXPECT_NE(s.log().find("scheduler policy: priority"), std::string::npos) << s.log();
    auto r = post(s, {{"prompt", "Hello"}, {"max_tokens", 2}, {"priority", 7}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;  // under the default FCFS this is a 400
  }
  {
    // Without the plugin that registers "priority", the platform's choice cannot be met.
    ScopedEnv only("TROUPE_PLUGINS", "sched_cpu");
    ServeProcess s({"--disable-log-stats"});
    EXPECT_FALSE(s.wait_healthy(std::chrono::seconds(60)));
    EXPECT_NE(s.log().find("scheduler policy 'priority' (--scheduler-cls) is not registered; registered: fcfs"),
              std::string::npos)
        << s.log();
  }
}

TEST(PolicyPlugins, UnknownNamesStopTheServerListingTheRegisteredOnes) {
  {
    ServeProcess s({"--scheduler-cls", "shortest-first", "--disable-log-stats"});
    EXPECT_FALSE(s.wait_healthy(std::chrono::seconds(60)));
    EXPECT_NE(s.log().find("scheduler policy 'shortest-first' (--scheduler-cls) is not registered; registered: fcfs, "
                           "priority"),
              std::string::npos)
        << s.log();
  }
  {
    ServeProcess s({"--logits-processors", "banned_words,no_such", "--disable-log-stats"});
    EXPECT_FALSE(s.wait_healthy(std::chrono::seconds(60)));
    EXPECT_NE(s.log().find("logits processor 'no_such' (--logits-processors) is not registered; registered: "
                           "banned_words"),
              std::string::npos)
        << s.log();
  }
}

TEST(BannedWords, BadArgumentsAre400s) {
  ServeProcess s({"--logits-processors", "banned_words", "--disable-log-stats"});  // stories260K
  ASSERT_TRUE(s.wait_healthy()) << s.log();
  const std::vector<std::pair<json, std::string>> cases = {
      {json{{"banned_words", {1, 2}}}, "banned_words must be a list of strings"},
      {json{{"banned_words", "dragon"}}, "banned_words must be a list of strings"},
      {json{{"banned_words", {""}}}, "a word is empty"},
      {json::array({1}), "vllm_xargs"},
      {json{{"nested", {{"x", 1}}}}, "value of 'nested'"},
  };
  for (const auto& [xargs, message] : cases) {
    auto r = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"vllm_xargs", xargs}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << xargs.dump() << ": " << r->body;
    EXPECT_NE(r->body.find(message), std::string::npos) << xargs.dump() << ": " << r->body;
  }
  auto ok = post(s, {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"vllm_xargs", {{"other", "x"}}}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200) << ok->body;  // keys of no enabled processor are ignored, as in vLLM
}

TEST(BannedWords, WordsNeverAppearAndTheRestOfTheBatchIsUnaffected) {
  if (!test_model()) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  ServeProcess s({"--logits-processors", "banned_words", "--disable-log-stats"}, test_model());
  ASSERT_TRUE(s.wait_healthy()) << s.log();
  const std::string banned_prompt = "The capital of France is";
  const std::string other_prompt = "Once upon a time, in a small village,";
  const std::vector<std::string> words = {"Paris", "France", "capital"};
  auto greedy = [](const std::string& prompt) {
    return json{{"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  };

  // Alone and without arguments, the model says the words (else the test proves nothing).
  const std::string unbanned = completion_text(post(s, greedy(banned_prompt)));
  EXPECT_NE(unbanned.find("Paris"), std::string::npos) << unbanned;
  const std::string other_alone = completion_text(post(s, greedy(other_prompt)));
  ASSERT_EQ(other_alone.rfind("<failed", 0), std::string::npos) << other_alone;

  // Both at once: the banned request and the other share the steps.
  json with_args = greedy(banned_prompt);
  with_args["vllm_xargs"] = {{"banned_words", words}};
  Streamed banned, other;
  std::thread t1([&] { banned = stream(s, with_args); });
  std::thread t2([&] { other = stream(s, greedy(other_prompt)); });
  t1.join();
  t2.join();
  ASSERT_EQ(banned.status, 200) << banned.error << banned.text;
  ASSERT_EQ(other.status, 200) << other.error << other.text;
  EXPECT_TRUE(banned.first < other.last && other.first < banned.last)
      << "the two requests did not run at the same time";
  for (const auto& w : words) EXPECT_EQ(banned.text.find(w), std::string::npos) << "'" << w << "' in: " << banned.text;
  EXPECT_FALSE(banned.text.empty());
  EXPECT_NE(banned.text, unbanned);
  EXPECT_EQ(other.text, other_alone) << "a request without arguments changed because of its neighbour";
}

}  // namespace
}  // namespace troupe::tests

namespace troupe::tests {
namespace {

TEST(BannedWords, OfflineGenerateWithTheSamplingRankInANodeProcess) {
  // `troupe generate` runs the C++ engine API; with two tensor-parallel ranks the
  // sampling rank (rank 0) runs in a local node process, which loads the plugin itself.
  const std::string base = "generate " + std::string(TROUPE_TEST_DATA_DIR) +
                           "/stories260K.gguf -p 'Once upon a time' -n 40 --threads 1";
  auto plain = testing::run_troupe(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_NE(plain.out.find("Lily"), std::string::npos) << plain.out;  // else the test proves nothing
  ASSERT_NE(plain.out.find("girl"), std::string::npos) << plain.out;
  auto banned = testing::run_troupe(base + " --tensor-parallel-size 2 --logits-processors banned_words"
                                           " --vllm-xargs '{\"banned_words\": [\"Lily\", \"girl\"]}'");
  ASSERT_EQ(banned.exit_code, 0) << banned.err;
  EXPECT_EQ(banned.out.find("Lily"), std::string::npos) << banned.out;
  EXPECT_EQ(banned.out.find("girl"), std::string::npos) << banned.out;
  EXPECT_GT(banned.out.size(), 20u) << banned.out;
}

}  // namespace
}  // namespace troupe::tests
