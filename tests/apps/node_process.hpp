// Black-box test helper: a real `troupe node` process on loopback, on a port
// of its own choosing (or a given one, to come back at the same address).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace troupe::tests {

class NodeProcess {
 public:
  /// Starts `troupe node --host HOST --port PORT --secret-file SECRET_FILE EXTRA_ARGS...`
  /// with `env` ("NAME=value") added to this process's environment. HOST: a
  /// loopback address (127.0.0.2 stands for a second host).
  NodeProcess(std::string secret_file, int port = 0, std::vector<std::string> env = {},
              std::string host = "127.0.0.1", std::vector<std::string> extra_args = {})
      : secret_file_(std::move(secret_file)),
        env_(std::move(env)),
        host_(std::move(host)),
        extra_args_(std::move(extra_args)) {
    static int counter = 0;
    tag_ = fmt::format("{}_{}", ::getpid(), counter++);
    start(port);
  }
  ~NodeProcess() {
    kill_now(SIGKILL);
    std::remove(log_path_.c_str());
    std::remove(port_file_.c_str());
  }

  /// Waits (bounded) until the node listens; false if it exited first.
  bool wait_listening(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file_);
      int p = 0;
      if (in >> p && p > 0) {
        port_ = p;
        return true;
      }
      if (exited()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  /// Sends `sig`; SIGKILL also reaps the process.
  void kill_now(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig == SIGKILL) {
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  /// Waits (bounded) for the process to exit; its exit status, or -1 (still running after
  /// `timeout`, or killed by a signal).
  int wait_exit(std::chrono::seconds timeout) {
    for (auto deadline = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < deadline;) {
      int status = 0;
      if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  /// A new process at the same port (after kill_now(SIGKILL)).
  void restart() {
    kill_now(SIGKILL);
    start(port_);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  std::string log() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  void start(int port) {
    log_path_ = fmt::format("/tmp/troupe_node_test_{}.log", tag_);
    port_file_ = fmt::format("/tmp/troupe_node_test_{}.port", tag_);
    std::remove(port_file_.c_str());
    std::vector<std::string> args = {TROUPE_EXE,      "node", "--host",          host_,
                                     "--port",        std::to_string(port), "--port-file", port_file_};
    if (!secret_file_.empty()) {
      args.push_back("--secret-file");
      args.push_back(secret_file_);
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_storage;
    for (char** e = environ; *e; ++e) env_storage.emplace_back(*e);
    env_storage.insert(env_storage.end(), env_.begin(), env_.end());
    std::vector<char*> envp;
    for (auto& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  bool exited() {
    if (pid_ <= 0) return true;
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }

  std::string secret_file_;
  std::vector<std::string> env_;
  std::string host_;
  std::vector<std::string> extra_args_;
  std::string tag_;
  std::string log_path_;
  std::string port_file_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace troupe::tests
