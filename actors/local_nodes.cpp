#include "actors/local_nodes.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "net/crypto.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

namespace fs = std::filesystem;

/// The port a node wrote, or 0 while it has not.
int read_port(const std::string& path) {
  std::ifstream in(path);
  int port = 0;
  in >> port;
  return in ? port : 0;
}

}  // namespace

Result<std::string> LocalNodes::find_executable(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("TROUPE_NODE_EXECUTABLE"); env && *env) return std::string(env);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (self.filename() == "troupe") return self.string();
    const fs::path beside = self.parent_path() / "troupe";
    if (fs::exists(beside, ec)) return beside.string();
  }
  return not_found("cannot find the troupe executable to start local nodes with; set TROUPE_NODE_EXECUTABLE "
                   "(or EngineOptions::node_executable), or give --nodes");
}

Result<std::unique_ptr<LocalNodes>> LocalNodes::start(const std::string& executable, int count,
                                                      std::chrono::milliseconds timeout) {
  std::unique_ptr<LocalNodes> nodes(new LocalNodes());
  char tmpl[] = "/tmp/troupe-nodes-XXXXXX";
  if (!mkdtemp(tmpl)) return unavailable("cannot create a folder for local nodes in /tmp");
  nodes->dir_ = tmpl;
  auto secret = crypto::random_hex(32);  // 256 bits from the OS's CSPRNG
  if (!secret.ok()) return secret.status();
  nodes->secret_ = std::move(*secret);
  const std::string secret_file = nodes->dir_ + "/secret";
  {
    std::ofstream(secret_file) << nodes->secret_ << "\n";
    ::chmod(secret_file.c_str(), 0600);
  }
  std::vector<std::string> port_files;
  for (int i = 0; i < count; ++i) {
    port_files.push_back(nodes->dir_ + "/port." + std::to_string(i));
    std::vector<std::string> args = {executable, "node", "--host", "127.0.0.1", "--port", "0",
                                     "--secret-file", secret_file, "--port-file", port_files.back()};
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return unavailable("cannot start local node " + std::to_string(i) + ": fork failed");
    if (pid == 0) {
      // The node goes when its head goes, even if the head is killed.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) std::_Exit(1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    nodes->pids_.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int i = 0; i < count; ++i) {
    int port = 0;
    while ((port = read_port(port_files[i])) == 0) {
      int status = 0;
      if (::waitpid(nodes->pids_[i], &status, WNOHANG) == nodes->pids_[i]) {
        nodes->pids_[i] = -1;
        return unavailable("local node " + std::to_string(i) + " (" + executable + " node) exited with " +
                           (WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status))) +
                           " before it listened; see its log above");
      }
      if (std::chrono::steady_clock::now() > deadline)
        return unavailable("local node " + std::to_string(i) + " did not listen within " +
                           std::to_string(timeout.count()) + " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    nodes->addresses_.push_back("127.0.0.1:" + std::to_string(port));
  }
  TROUPE_LOG_INFO("started {} local node process(es)", count);
  return nodes;
}

LocalNodes::~LocalNodes() {
  for (pid_t pid : pids_)
    if (pid > 0) ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (pid_t& pid : pids_) {
    while (pid > 0) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
      } else if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

}  // namespace troupe::actors
