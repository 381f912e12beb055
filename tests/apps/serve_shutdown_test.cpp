// `troupe serve` on SIGTERM, a real process: new requests (and /health) get 503
// at once; with --shutdown-timeout a stream in flight runs to its end, without
// one (or past it) it is cut, and ends with finish_reason "abort", an error
// event and [DONE]; the process exits 0 either way, however often SIGTERM is repeated.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <string>

#include "serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;

struct StreamEnd {
  std::string last;          // the last data event before [DONE]
  std::string last_chunk;    // the last one with choices
  bool done = false;         // [DONE] came
  int events = 0;
  int health_during = 0;     // /health's status once SIGTERM was sent
  int completion_during = 0; // a new request's status then
};

/// Streams a long greedy completion; at its first event sends SIGTERM to `serve` and asks
/// /health and a new completion.
StreamEnd stream_then_sigterm(ServeProcess& serve) {
  json body = {{"model", "stories260K.gguf"}, {"prompt", "Once upon a time"}, {"max_tokens", 1800},
               {"ignore_eos", true},          {"temperature", 0},                {"stream", true}};
  StreamEnd out;
  apps::http::SseParser parser;
  (void)apps::http::request(
      "127.0.0.1", serve.port(), "POST", "/v1/completions", body.dump(), {{"Content-Type", "application/json"}},
      [&](std::string_view bytes) {
        parser.feed(bytes, [&](std::string_view data) {
          if (data == "[DONE]") out.done = true;
          else out.last = std::string(data);
          if (data.find("\"choices\"") != std::string_view::npos) out.last_chunk = std::string(data);
          if (out.events++ == 0) {
            serve.send_signal(SIGTERM);
            std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the signal is handled
            auto h = apps::http::request("127.0.0.1", serve.port(), "GET", "/health", "", {}, {},
                                         std::chrono::seconds(5));
            out.health_during = h.ok() ? h->status : -1;
            json small = {{"model", "stories260K.gguf"}, {"prompt", "Hi"}, {"max_tokens", 2}};
            auto c = apps::http::request("127.0.0.1", serve.port(), "POST", "/v1/completions", small.dump(),
                                         {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(5));
            out.completion_during = c.ok() ? c->status : -1;
          }
        });
        return true;
      },
      std::chrono::seconds(120));
  return out;
}

TEST(ServeShutdown, WithATimeoutARequestInFlightFinishesAndNewOnesAreRefused) {
  ServeProcess serve({"--shutdown-timeout", "120", "--disable-log-stats"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  const StreamEnd end = stream_then_sigterm(serve);
  EXPECT_EQ(end.health_during, 503);
  EXPECT_EQ(end.completion_during, 503);
  EXPECT_NE(end.last.find("\"finish_reason\":\"length\""), std::string::npos) << "the stream was cut: " << end.last;
  EXPECT_EQ(serve.stop(), 0) << serve.log();
  EXPECT_NE(serve.log().find("1 in flight, waiting up to 120 s"), std::string::npos) << serve.log();
  EXPECT_NE(serve.log().find("Shutdown complete"), std::string::npos) << serve.log();
}

// A cut stream says so: its choice ends with vLLM's finish_reason for aborted requests,
// then an error event names the shutdown, then [DONE].
void expect_cut(const StreamEnd& end, const std::string& why) {
  EXPECT_NE(end.last_chunk.find("\"finish_reason\":\"abort\""), std::string::npos) << end.last_chunk;
  auto error = json::parse(end.last, nullptr, false);
  ASSERT_TRUE(error.is_object() && error.contains("error")) << end.last;
  EXPECT_EQ(error["error"]["code"], 503) << end.last;
  EXPECT_NE(error["error"]["message"].get<std::string>().find(why), std::string::npos) << end.last;
  EXPECT_TRUE(end.done) << "no [DONE] after the cut";
}

TEST(ServeShutdown, WithoutATimeoutARequestInFlightIsAbortedAndTheServerExitsZero) {
  ServeProcess serve({"--disable-log-stats"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  const StreamEnd end = stream_then_sigterm(serve);
  EXPECT_NE(end.health_during, 200);  // 503, or (closed already) no answer
  EXPECT_EQ(end.last.find("\"finish_reason\":\"length\""), std::string::npos) << "it ran to its end: " << end.last;
  EXPECT_LT(end.events, 1800);
  expect_cut(end, "the server is shutting down");
  EXPECT_EQ(serve.stop(), 0) << serve.log();
  EXPECT_NE(serve.log().find("aborting 1 request(s) still in flight"), std::string::npos) << serve.log();
}

TEST(ServeShutdown, AStreamCutByTheShutdownTimeoutEndsWithAbortAnErrorEventAndDone) {
  ServeProcess serve({"--shutdown-timeout", "0.3", "--disable-log-stats"});
  ASSERT_TRUE(serve.wait_healthy()) << serve.log();
  const StreamEnd end = stream_then_sigterm(serve);
  EXPECT_LT(end.events, 1800);
  expect_cut(end, "--shutdown-timeout of 0.3 s passed");
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

// A supervisor that repeats SIGTERM while the server is on its way out must not turn
// its exit 0 into death by signal (the HTTP side's signal handler is gone by then).
TEST(ServeShutdown, SigtermRepeatedUntilTheProcessIsGoneStillEndsInExitZero) {
  for (int round = 0; round < 3; ++round) {
    ServeProcess serve({"--disable-log-stats"});
    ASSERT_TRUE(serve.wait_healthy()) << serve.log();
    EXPECT_EQ(serve.stop(std::chrono::milliseconds(1)), 0) << "round " << round << "\n" << serve.log();
  }
}

}  // namespace
}  // namespace troupe::tests
