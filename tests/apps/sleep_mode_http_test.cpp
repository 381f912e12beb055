// Sleep mode through a real `troupe serve` on loopback: the routes, the API key,
// requests that wait while the engine sleeps, identical greedy output after
// waking (both levels, and waking in parts), the Prometheus gauge, errors, the
// bound on waits while asleep (--sleep-wait-timeout), and a request whose client
// left not blocking the next sleep.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/raw_socket.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

class SleepModeHttp : public ::testing::Test {
 protected:
  http::Response call(const std::string& method, const std::string& target, const std::string& body = "",
                      bool with_key = true) {
    http::Headers headers = {{"Content-Type", "application/json"}};
    if (with_key) headers.push_back({"Authorization", "Bearer sleepy"});
    auto r = http::request("127.0.0.1", server_->port(), method, target, body, headers, {}, std::chrono::seconds(60));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : http::Response{};
  }
  std::string complete() {
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}};
    http::Response r = call("POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() ? j["choices"][0]["text"].get<std::string>() : std::string();
  }
  // A gauge of /metrics ("troupe:num_requests_waiting"), or -1.
  double gauge(const std::string& name) {
    const std::string text = call("GET", "/metrics").body;
    const size_t at = text.find("\n" + name + "{");
    if (at == std::string::npos) return -1;
    const size_t space = text.find("} ", at);
    return std::stod(text.substr(space + 2, text.find('\n', space) - space - 2));
  }
  // Stats reach the Prometheus registry through the stat-logger actor, after the
  // HTTP reply that caused them: wait (up to 10 s) for a gauge to settle on a value.
  double settled_gauge(const std::string& name, double want) {
    double got = gauge(name);
    for (int i = 0; i < 2000 && got != want; ++i) {
      usleep(5000);
      got = gauge(name);
    }
    return got;
  }
  void start(std::vector<std::string> extra) {
    server_ = std::make_unique<tests::ServeProcess>(std::move(extra));
    ASSERT_TRUE(server_->wait_healthy()) << server_->log();
  }
  std::unique_ptr<tests::ServeProcess> server_;
};

TEST_F(SleepModeHttp, TheRoutesAreOffWithoutTheFlag) {
  start({});
  http::Response r = call("POST", "/sleep?level=1");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("start troupe serve with --enable-sleep-mode"), std::string::npos) << r.body;
  EXPECT_EQ(call("GET", "/is_sleeping").status, 404);
}

TEST_F(SleepModeHttp, RequestsWaitWhileAsleepAndTheOutputIsTheSameAfterWaking) {
  start({"--enable-sleep-mode", "--api-key", "sleepy"});
  EXPECT_EQ(call("POST", "/sleep?level=1", "", /*with_key=*/false).status, 401);
  const std::string awake = complete();
  ASSERT_FALSE(awake.empty());
  EXPECT_EQ(json::parse(call("GET", "/is_sleeping").body)["is_sleeping"], false);

  http::Response slept = call("POST", "/sleep?level=1");
  ASSERT_EQ(slept.status, 200) << slept.body;
  json s = json::parse(slept.body);
  EXPECT_EQ(s["level"], 1);
  EXPECT_TRUE(s["freed_resident_bytes"].is_number_integer());
  json state = json::parse(call("GET", "/is_sleeping").body);
  EXPECT_EQ(state["is_sleeping"], true);
  EXPECT_EQ(state["level"], 1);
  EXPECT_EQ(settled_gauge("troupe:engine_sleep_state", 1), 1);

  // A request sent now waits in the queue until the engine wakes.
  auto waiting = std::async(std::launch::async, [this] { return complete(); });
  ASSERT_EQ(settled_gauge("troupe:num_requests_waiting", 1), 1);
  http::Response refused = call("POST", "/sleep?level=2");  // a request is unfinished
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("cannot sleep while requests are unfinished"), std::string::npos) << refused.body;
  ASSERT_EQ(call("POST", "/wake_up").status, 200);
  EXPECT_EQ(waiting.get(), awake);
  EXPECT_EQ(settled_gauge("troupe:engine_sleep_state", 0), 0);

  // Level 2, woken in parts: asleep until both parts are back.
  ASSERT_EQ(call("POST", "/sleep?level=2").status, 200);
  EXPECT_EQ(settled_gauge("troupe:engine_sleep_state", 2), 2);
  ASSERT_EQ(call("POST", "/wake_up?tags=weights").status, 200);
  EXPECT_EQ(json::parse(call("GET", "/is_sleeping").body)["is_sleeping"], true);
  ASSERT_EQ(call("POST", "/wake_up?tags=kv_cache").status, 200);
  EXPECT_EQ(json::parse(call("GET", "/is_sleeping").body)["is_sleeping"], false);
  EXPECT_EQ(complete(), awake);

  http::Response bad_level = call("POST", "/sleep?level=3");
  EXPECT_EQ(bad_level.status, 400) << bad_level.body;
  EXPECT_NE(bad_level.body.find("sleep level must be 1 or 2"), std::string::npos) << bad_level.body;
  http::Response bad_tag = call("POST", "/wake_up?tags=lora");
  EXPECT_EQ(bad_tag.status, 400) << bad_tag.body;
  EXPECT_EQ(call("GET", "/sleep").status, 405);
}

TEST_F(SleepModeHttp, AWaitWhileAsleepIsBoundedAndAnAbandonedRequestDoesNotBlockSleep) {
  start({"--enable-sleep-mode", "--api-key", "sleepy", "--sleep-wait-timeout", "1.5"});
  ASSERT_EQ(call("POST", "/sleep?level=1").status, 200);
  const auto sent = std::chrono::steady_clock::now();
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
  http::Response late = call("POST", "/v1/completions", body.dump());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(late.status, 503) << late.body;
  EXPECT_NE(late.body.find("the engine is asleep (level 1)"), std::string::npos) << late.body;
  EXPECT_NE(late.body.find("waited 1.5 s"), std::string::npos) << late.body;
  EXPECT_GE(waited, 1.4);
  EXPECT_LT(waited, 30.0);  // bounded: the limit plus scheduling slack, never the 60 s default
  EXPECT_EQ(settled_gauge("troupe:num_requests_waiting", 0), 0);
  ASSERT_EQ(call("POST", "/wake_up").status, 200);
  EXPECT_FALSE(complete().empty());

  // A long non-streaming request whose client goes away is aborted, so it does not
  // keep the engine from sleeping.
  const int fd = troupe::testing::connect_loopback(server_->port());
  ASSERT_GE(fd, 0);
  const std::string long_body = json{{"prompt", "Once upon a time"}, {"max_tokens", 1900}, {"ignore_eos", true}}.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sleepy\r\n"
                          "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(long_body.size()) + "\r\n\r\n" + long_body;
  ASSERT_EQ(troupe::testing::send_some(fd, req), req.size());
  ASSERT_EQ(settled_gauge("troupe:num_requests_running", 1), 1);
  ::close(fd);
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    status = call("POST", "/sleep?level=1").status;
    if (status != 200) usleep(100000);
  }
  EXPECT_EQ(status, 200) << "the abandoned request still blocks sleep after 10 s";
  ASSERT_EQ(call("POST", "/wake_up").status, 200);
}

}  // namespace
}  // namespace troupe
