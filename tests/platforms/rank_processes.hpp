// Several processes at once for the multi-process tests of tests/platforms:
// each its own process with its output in a file, all waited for with a bound,
// whatever is left killed and reaped. Below that, the runs of tp_rank_main
// (TP_RANK_MAIN, defined by the test's CMake target) that tensor_parallel_test
// and tcp_communicator_test share: its ranks meeting through shared memory or
// over TCP on loopback.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "tests/platforms/cpu_test_platform.hpp"

extern char** environ;

namespace troupe::testing {

using ProcessClock = std::chrono::steady_clock;

struct Exit {
  int code = -1;          // exit status; -1 when killed
  bool timed_out = false;
  std::string output;     // stdout and stderr
};

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "troupe-tp-XXXXXX").string();
    path_ = mkdtemp(t.data()) ? t : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Starts every command at once (each its own process, output to a file), waits for all of
/// them at most `timeout_s`, kills and reaps whatever is left.
inline std::vector<Exit> run_processes(const std::vector<std::vector<std::string>>& commands,
                                const std::map<std::string, std::string>& env_extra, double timeout_s) {
  static int serial = 0;
  TempDir logs;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!env_extra.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env_extra) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<pid_t> pids(commands.size(), -1);
  std::vector<Exit> exits(commands.size());
  std::vector<std::string> log_paths;
  for (size_t i = 0; i < commands.size(); ++i) {
    log_paths.push_back(logs.path() + "/p" + std::to_string(serial++) + ".log");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_paths.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> args = commands[i];
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) pids[i] = pid;
    else exits[i].output = "posix_spawn failed: " + std::string(std::strerror(rc));
  }
  const auto deadline = ProcessClock::now() + std::chrono::duration<double>(timeout_s);
  size_t running = static_cast<size_t>(std::count_if(pids.begin(), pids.end(), [](pid_t p) { return p > 0; }));
  while (running > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        exits[i].code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pids[i] = -1;
        --running;
      }
    }
    if (running == 0) break;
    if (ProcessClock::now() >= deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] <= 0) continue;
        kill(pids[i], SIGKILL);
        int status = 0;
        waitpid(pids[i], &status, 0);
        exits[i].timed_out = true;
        pids[i] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < commands.size(); ++i)
    if (exits[i].output.empty()) exits[i].output = read_text(log_paths[i]);
  return exits;
}

inline std::string last_result(const std::string& output) {
  const size_t at = output.rfind("RESULT ");
  if (at == std::string::npos) return "(no RESULT line)";
  return output.substr(at + 7, output.find('\n', at) - at - 7);
}

/// The seconds in a "waited N s" line of a rank's output (-1 when there is none).
inline double waited_seconds(const std::string& output) {
  const size_t at = output.find("waited ");
  return at == std::string::npos ? -1.0 : std::atof(output.c_str() + at + 7);
}

// ---------------------------------------------------------------------------------------
// tp_rank_main runs

// Only for tests that define TP_RANK_MAIN (its path); the helpers above serve any rank program.
#ifdef TP_RANK_MAIN

/// How the ranks of one run meet: a shared-memory id made here (Platform::make_communicator_id),
/// or TCP on 127.0.0.1, whose ids rank 0 makes in its own process.
enum class Transport { shm, tcp };

/// A fresh shared-memory communicator id for `world` ranks ("" and a test failure if none).
inline std::string new_shm_id(int world) {
  ParallelConfig p;
  p.tensor_parallel_size = world;
  auto id = cpu_platform()->make_communicator_id(p);
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  return id.ok() ? *id : std::string();
}

/// The flags by which every rank of a run of `world` ranks finds the others: shm: --id (and,
/// with `token_id`, --token-id: the second communicator of `model` runs); tcp: the file in
/// `dir` where rank 0 writes its ids. A world of one meets nobody.
inline std::vector<std::string> meeting_flags(Transport t, int world, bool token_id, const std::string& dir) {
  if (world == 1) return {};
  if (t == Transport::tcp) return {"--tcp-host", "127.0.0.1", "--id-file", dir + "/ids"};
  std::vector<std::string> flags = {"--id", new_shm_id(world)};
  if (token_id) flags.insert(flags.end(), {"--token-id", new_shm_id(world)});
  return flags;
}

/// `tp_rank_main comm --case which` as ranks `ranks` of a world of `world` (the others are not
/// started); with `out`: --out; `extra[r]`: more flags of rank r.
inline std::vector<Exit> run_comm(Transport t, int world, const std::string& which, const std::vector<int>& ranks,
                                  const std::map<std::string, std::string>& env, double timeout_s,
                                  const std::string& out = "", std::map<int, std::vector<std::string>> extra = {}) {
  TempDir dir;
  const std::vector<std::string> meet = meeting_flags(t, world, false, dir.path());
  std::vector<std::vector<std::string>> cmds;
  for (int r : ranks) {
    std::vector<std::string> c = {TP_RANK_MAIN, "comm", "--rank", std::to_string(r), "--world", std::to_string(world),
                                  "--case", which};
    c.insert(c.end(), meet.begin(), meet.end());
    if (!out.empty()) c.insert(c.end(), {"--out", out});
    c.insert(c.end(), extra[r].begin(), extra[r].end());
    cmds.push_back(c);
  }
  return run_processes(cmds, env, timeout_s);
}

/// `tp_rank_main model`: `model` split over tp x pp processes (a communicator timeout of 60 s,
/// warnings only); rank 0 writes its logits to `out`. `extra`: more flags of every rank.
inline std::vector<Exit> run_model(Transport t, const std::string& model, int tp, int pp, const std::string& out,
                                   const std::vector<std::string>& extra, double timeout_s) {
  TempDir dir;
  const int world = tp * pp;
  const std::vector<std::string> meet = meeting_flags(t, world, true, dir.path());
  std::vector<std::vector<std::string>> cmds;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> c = {TP_RANK_MAIN, "model", "--model", model, "--rank", std::to_string(r),
                                  "--tp", std::to_string(tp), "--pp", std::to_string(pp), "--out", out};
    c.insert(c.end(), meet.begin(), meet.end());
    c.insert(c.end(), extra.begin(), extra.end());
    cmds.push_back(c);
  }
  return run_processes(cmds, {{"TROUPE_CPU_COMM_TIMEOUT_S", "60"}, {"TROUPE_LOG_LEVEL", "warning"}}, timeout_s);
}

/// Every process ended in time with exit code 0 and "RESULT ok".
inline void expect_all_ok(const std::vector<Exit>& exits) {
  for (size_t r = 0; r < exits.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(exits[r].timed_out) << exits[r].output;
    EXPECT_EQ(exits[r].code, 0) << exits[r].output;
    EXPECT_EQ(last_result(exits[r].output), "ok") << exits[r].output;
  }
}

#endif  // TP_RANK_MAIN

}  // namespace troupe::testing
