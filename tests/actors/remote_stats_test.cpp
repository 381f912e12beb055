// Stat events reach a subscriber in another process: the engine publishes its
// stat logger, a real second process (`troupe stats --connect`) subscribes and
// prints the events it receives.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <future>
#include <sstream>
#include <string>

#include "actors/engine.hpp"

namespace {

TEST(RemoteStats, AnotherProcessReceivesStatEvents) {
  troupe::engine::EngineOptions opts;
  opts.config.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
  opts.stat_log_interval_s = 0;
  auto engine = troupe::engine::Engine::start(std::move(opts));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto port = (*engine)->publish_stat_logger(0);
  ASSERT_TRUE(port.ok()) << port.status().to_string();

  std::string cmd = std::string(TROUPE_EXE) + " stats --connect 127.0.0.1:" + std::to_string(*port) +
                    " --count 3 --timeout 60 2>/dev/null";
  auto child = std::async(std::launch::async, [cmd] {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return std::make_pair(-1, out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    return std::make_pair(pclose(p), out);
  });
  // Keep the engine busy until the other process has seen its events (it may
  // take a moment to connect and subscribe).
  for (int i = 0; i < 200 && child.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready; ++i) {
    troupe::engine::GenerateRequest req;
    req.prompt = "Once upon a time";
    req.sampling.temperature = 0;
    req.sampling.max_tokens = 8;
    ASSERT_TRUE((*engine)->generate(req).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto [rc, out] = child.get();
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string line;
  int events = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.contains("running") && j.contains("kv_cache_usage") && j.contains("generation_tokens")) << line;
    ++events;
  }
  EXPECT_EQ(events, 3);
}

}  // namespace

namespace {

std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, out};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return {pclose(p), out};
}

// `troupe stats` run as `command` (--connect and credentials) gets a step's events while
// the engine generates.
void expect_subscriber_gets_events(troupe::engine::Engine& engine, const std::string& command) {
  auto child = std::async(std::launch::async, [&] { return run(command + " --count 1 --timeout 60"); });
  for (int i = 0; i < 200 && child.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready; ++i) {
    troupe::engine::GenerateRequest req;
    req.prompt = "Once upon a time";
    req.sampling.temperature = 0;
    req.sampling.max_tokens = 4;
    ASSERT_TRUE(engine.generate(req).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto [rc, out] = child.get();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"generation_tokens\""), std::string::npos) << out;
}

TEST(RemoteStats, APublishedStatLoggerWithASecretAdmitsOnlyPeersThatProveIt) {
  troupe::engine::EngineOptions opts;
  opts.config.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
  opts.stat_log_interval_s = 0;
  auto engine = troupe::engine::Engine::start(std::move(opts));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  // Every interface without a secret is refused outright.
  auto open_to_all = (*engine)->publish_stat_logger(0, "0.0.0.0");
  ASSERT_FALSE(open_to_all.ok());
  EXPECT_NE(open_to_all.status().message().find("needs a secret"), std::string::npos);
  auto port = (*engine)->publish_stat_logger(0, "127.0.0.1", "stats secret");
  ASSERT_TRUE(port.ok()) << port.status().to_string();
  const std::string right = "/tmp/troupe_remote_stats_right_" + std::to_string(getpid());
  const std::string wrong = "/tmp/troupe_remote_stats_wrong_" + std::to_string(getpid());
  std::ofstream(right) << "stats secret\n";
  std::ofstream(wrong) << "not it\n";
  const std::string base = std::string(TROUPE_EXE) + " stats --connect 127.0.0.1:" + std::to_string(*port);
  auto [refused_rc, refused_out] = run(base + " --secret-file " + wrong + " --count 1 --timeout 30");
  EXPECT_NE(refused_rc, 0);
  EXPECT_NE(refused_out.find("wrong secret"), std::string::npos) << refused_out;
  expect_subscriber_gets_events(**engine, base + " --secret-file " + right);
  std::remove(right.c_str());
  std::remove(wrong.c_str());
}

// The stats port with mutual TLS (the engine's --tls-* files, from the real `troupe certs`):
// a subscriber of the cluster CA gets events; one with a certificate of another CA is refused.
TEST(RemoteStats, AStatLoggerWithTlsAdmitsOnlyCertificatesOfTheClusterCa) {
  const std::string dir = "/tmp/troupe_remote_stats_tls_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  for (const char* cluster : {"a", "b"})
    ASSERT_EQ(run(std::string(TROUPE_EXE) + " certs --out " + dir + "/" + cluster + " --hosts 127.0.0.1,head").first,
              0);
  troupe::engine::EngineOptions opts;
  opts.config.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
  opts.stat_log_interval_s = 0;
  opts.tls_cert_file = dir + "/a/127.0.0.1.pem";
  opts.tls_key_file = dir + "/a/127.0.0.1-key.pem";
  opts.tls_ca_file = dir + "/a/ca.pem";
  auto engine = troupe::engine::Engine::start(std::move(opts));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  // TLS alone is enough off loopback.
  auto open_to_all = (*engine)->publish_stat_logger(0, "0.0.0.0");
  EXPECT_TRUE(open_to_all.ok()) << open_to_all.status().to_string();
  auto port = (*engine)->publish_stat_logger(0, "127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status().to_string();
  const std::string base = std::string(TROUPE_EXE) + " stats --connect 127.0.0.1:" + std::to_string(*port);
  const std::string other = " --tls-cert " + dir + "/b/head.pem --tls-key " + dir + "/b/head-key.pem --tls-ca " +
                            dir + "/a/ca.pem";
  auto [refused_rc, refused_out] = run(base + other + " --count 1 --timeout 30");
  EXPECT_NE(refused_rc, 0);
  EXPECT_NE(refused_out.find("refused the TLS connection"), std::string::npos) << refused_out;
  auto [plain_rc, plain_out] = run(base + " --count 1 --timeout 30");
  EXPECT_NE(plain_rc, 0) << plain_out;
  const std::string mine = " --tls-cert " + dir + "/a/head.pem --tls-key " + dir + "/a/head-key.pem --tls-ca " +
                           dir + "/a/ca.pem";
  expect_subscriber_gets_events(**engine, base + mine);
  std::filesystem::remove_all(dir);
}

}  // namespace
