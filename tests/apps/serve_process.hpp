// Black-box test helper: runs a real `troupe serve` process on a free
// 127.0.0.1 port, waits for /health, and stops it with SIGTERM.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench/http_client.hpp"

extern char** environ;

namespace troupe::tests {

/// A port nobody listens on right now (bind to 0, read it back, close).
inline int free_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

/// ServeProcess's model argument for a server started without one (--load-format dummy).
inline constexpr const char* kNoModel = "<no model>";

class ServeProcess {
 public:
  /// Starts `troupe serve MODEL --host 127.0.0.1 --port P extra...` (MODEL: stories260K by default;
  /// kNoModel: none), run by `prefix` when given (e.g. {"/usr/bin/prlimit", "--nofile=1024:1024", "--"}).
  explicit ServeProcess(std::vector<std::string> extra, std::string model = "", std::vector<std::string> prefix = {}) {
    port_ = free_port();
    log_path_ = fmt::format("/tmp/troupe_serve_test_{}_{}.log", ::getpid(), port_);
    if (model.empty()) model = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
    std::vector<std::string> args = {TROUPE_EXE, "serve", model,
                                     "--host", "127.0.0.1", "--port", std::to_string(port_), "--threads", "1"};
    if (model == kNoModel) args.erase(args.begin() + 2);
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.begin(), prefix.begin(), prefix.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~ServeProcess() {
    stop();
    std::remove(log_path_.c_str());
  }

  /// Polls /health until 200 (or the process exited, or the deadline passed).
  bool wait_healthy(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pid_ <= 0 || exited()) return false;
      auto r = apps::http::request("127.0.0.1", port_, "GET", "/health", "", {}, {}, std::chrono::seconds(5));
      if (r.ok() && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  /// Sends `sig` without waiting.
  void send_signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  /// SIGTERM and wait (SIGKILL after 20 s); returns the exit status (-1 when killed).
  /// With `repeat_every` > 0 the SIGTERM is sent again at that interval until the
  /// process is gone (an impatient supervisor).
  int stop(std::chrono::milliseconds repeat_every = std::chrono::milliseconds(0)) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    const auto poll = repeat_every.count() > 0 ? repeat_every : std::chrono::milliseconds(50);
    while (!exited() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(poll);
      if (repeat_every.count() > 0 && pid_ > 0) ::kill(pid_, SIGTERM);
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
      exit_code_ = -1;
    }
    return exit_code_;
  }

  std::string log() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  bool exited() {
    if (pid_ <= 0) return true;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      pid_ = -1;
      return true;
    }
    return false;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string log_path_;
};

/// POST `body` as JSON to `path`, expect HTTP `want` (a test failure otherwise) and
/// return the parsed answer (discarded JSON when it is not JSON).
inline nlohmann::json post_json(const ServeProcess& s, const std::string& path, const nlohmann::json& body,
                                int want = 200) {
  auto r = apps::http::request("127.0.0.1", s.port(), "POST", path, body.dump(),
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(120));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return nlohmann::json();
  EXPECT_EQ(r->status, want) << r->body;
  return nlohmann::json::parse(r->body, nullptr, false);
}

/// One `troupe serve` of the default model (TROUPE_TEST_MODEL, which scripts/test.sh
/// sets) shared by the tests of a suite: start() in SetUpTestSuite, stop() in
/// TearDownTestSuite, and TROUPE_REQUIRE_SERVER(shared) first in SetUp.
class SharedModelServer {
 public:
  void start(std::vector<std::string> extra) {
    const char* model = std::getenv("TROUPE_TEST_MODEL");
    if (!model || !*model) return;
    server_ = std::make_unique<ServeProcess>(std::move(extra), model);
    healthy_ = server_->wait_healthy();
    if (!healthy_) std::fprintf(stderr, "server log:\n%s\n", server_->log().c_str());
  }
  void stop() { server_.reset(); }
  bool started() const { return server_ != nullptr; }
  bool healthy() const { return healthy_; }
  ServeProcess& operator*() { return *server_; }
  ServeProcess* operator->() { return server_.get(); }

 private:
  std::unique_ptr<ServeProcess> server_;
  bool healthy_ = false;
};

}  // namespace troupe::tests

/// Skips the test without TROUPE_TEST_MODEL; fails it when the shared server is not healthy.
#define TROUPE_REQUIRE_SERVER(shared)                                                            \
  do {                                                                                           \
    if (!(shared).started()) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)"; \
    ASSERT_TRUE((shared).healthy()) << "troupe serve did not become healthy";                   \
  } while (0)
