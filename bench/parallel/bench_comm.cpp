// The CPU communicators side by side: all_reduce and a send/recv ping-pong of
// several sizes between W rank processes, over shared memory (one host) and
// over TCP on loopback (what ranks on several hosts use), in one run:
//
//   troupe_bench_comm [--world 2] [--seconds 0.5]
//
// Prints microseconds per operation and the ratio TCP / shared memory. The
// ranks are this program started again with --rank; each size runs a fixed
// number of iterations chosen so one size takes about --seconds over shared
// memory (the same counts over TCP).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "plugin_host/plugin_host.hpp"
#include "troupe/communicator.hpp"
#include "troupe/log.hpp"
#include "troupe/platform.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

const std::vector<int64_t> kSizes = {256, 4 << 10, 64 << 10, 1 << 20, 16 << 20};  // bytes

troupe::Platform* cpu_platform() {
  auto& host = troupe::plugin_host::PluginHost::instance();
  host.load_all();
  auto p = host.activate_platform();
  if (!p.ok() || (*p)->device_type() != "cpu") return nullptr;
  return *p;
}

/// One rank: prints "row OP BYTES SECONDS_PER_OP" lines (rank 0) for every size.
int run_rank(int rank, int world, const std::string& id_arg, const std::string& id_file, double seconds) {
  troupe::Platform* platform = cpu_platform();
  if (!platform) return 2;
  troupe::ParallelConfig p;
  p.tensor_parallel_size = world;
  std::string id = id_arg;
  if (id.empty()) {  // tcp: rank 0 makes the id here (its listener), the others read it
    if (rank == 0) {
      p.communicator_host = "127.0.0.1";
      auto made = platform->make_communicator_id(p);
      if (!made.ok()) return std::fprintf(stderr, "%s\n", made.status().to_string().c_str()), 1;
      id = *made;
      { std::ofstream(id_file + ".tmp") << id << "\n"; }
      std::rename((id_file + ".tmp").c_str(), id_file.c_str());
    } else {
      for (auto deadline = Clock::now() + std::chrono::seconds(30); id.empty() && Clock::now() < deadline;) {
        std::ifstream in(id_file);
        std::getline(in, id);
        if (id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  p.communicator_id = id;
  auto comm = platform->make_device_communicator(p, rank);
  if (!comm.ok()) return std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().to_string().c_str()), 1;
  troupe::DeviceCommunicator& c = **comm;
  for (int64_t bytes : kSizes) {
    const int64_t n = bytes / 4;
    std::vector<float> x(static_cast<size_t>(n), 1.0f);
    // Rank 0 decides the iteration count from a short trial and tells the others.
    float iters_f = 1;
    auto trial = Clock::now();
    for (int i = 0; i < 3; ++i)
      if (!c.all_reduce(x.data(), n, troupe::DType::f32).ok()) return 1;
    const double per = std::chrono::duration<double>(Clock::now() - trial).count() / 3;
    iters_f = static_cast<float>(std::clamp(seconds / std::max(per, 1e-7), 5.0, 20000.0));
    if (!c.broadcast(&iters_f, 1, troupe::DType::f32, 0).ok()) return 1;
    const int iters = static_cast<int>(iters_f);
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
      if (!c.all_reduce(x.data(), n, troupe::DType::f32).ok()) return 1;
    const double all_reduce = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    // Ping-pong between ranks 0 and 1: half a round trip per message.
    t0 = Clock::now();
    for (int i = 0; i < iters && rank < 2; ++i) {
      const auto f32 = troupe::DType::f32;
      troupe::Status s = rank == 0 ? c.send(x.data(), n, f32, 1) : c.recv(x.data(), n, f32, 0);
      if (s.ok()) s = rank == 0 ? c.recv(x.data(), n, f32, 1) : c.send(x.data(), n, f32, 0);
      if (!s.ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
    }
    const double half_rtt = std::chrono::duration<double>(Clock::now() - t0).count() / iters / 2;
    if (rank == 0) {
      std::printf("row all_reduce %lld %.9f\n", static_cast<long long>(bytes), all_reduce);
      std::printf("row send_recv %lld %.9f\n", static_cast<long long>(bytes), half_rtt);
    }
    float done = 0;
    if (!c.all_reduce(&done, 1, troupe::DType::f32).ok()) return 1;
  }
  return 0;
}

/// Runs the ranks of one transport; rank 0's rows by (op, bytes).
std::map<std::pair<std::string, int64_t>, double> run_world(const std::string& self, int world,
                                                            const std::string& transport, double seconds) {
  std::map<std::pair<std::string, int64_t>, double> rows;
  std::string id;
  if (transport == "shm") {
    troupe::ParallelConfig p;
    p.tensor_parallel_size = world;
    auto made = cpu_platform()->make_communicator_id(p);
    if (!made.ok()) return rows;
    id = *made;
  }
  char dir_template[] = "/tmp/troupe-bench-comm-XXXXXX";
  const std::string dir = mkdtemp(dir_template) ? dir_template : "/tmp";
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {self, "--rank", std::to_string(r), "--world", std::to_string(world),
                                     "--seconds", std::to_string(seconds), "--id-file", dir + "/id",
                                     "--out", dir + "/rank" + std::to_string(r)};
    if (!id.empty()) args.insert(args.end(), {"--id", id});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, (dir + "/rank" + std::to_string(r)).c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    pid_t pid = -1;
    if (posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), environ) == 0) pids.push_back(pid);
    posix_spawn_file_actions_destroy(&fa);
  }
  bool ok = pids.size() == static_cast<size_t>(world);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::ifstream in(dir + "/rank0");
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    std::string tag, op;
    int64_t bytes = 0;
    double s = 0;
    if (ss >> tag >> op >> bytes >> s && tag == "row") rows[{op, bytes}] = s;
  }
  std::filesystem::remove_all(dir);
  if (!ok) std::fprintf(stderr, "%s: a rank failed\n", transport.c_str());
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe CPU communicators: shared memory vs TCP (loopback), microseconds per operation"};
  int world = 2, rank = -1;
  double seconds = 0.5;
  std::string id, id_file, out;
  app.add_option("--world", world, "ranks (processes), 2 to 8");
  app.add_option("--seconds", seconds, "about this long per size and op over shared memory");
  app.add_option("--rank", rank, "(internal) run as this rank");
  app.add_option("--id", id, "(internal) shared memory communicator id");
  app.add_option("--id-file", id_file, "(internal) where rank 0 writes its tcp id");
  app.add_option("--out", out, "(internal) this rank's output file");
  CLI11_PARSE(app, argc, argv);
  troupe::log::set_level(troupe::log::Level::warning);
  if (rank >= 0) return run_rank(rank, world, id, id_file, seconds);
  if (world < 2 || world > 8) return std::fprintf(stderr, "--world must be 2 to 8\n"), 1;
  if (!cpu_platform()) return std::fprintf(stderr, "the cpu platform plugin did not load\n"), 1;
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  const auto shm = run_world(self, world, "shm", seconds);
  const auto tcp = run_world(self, world, "tcp", seconds);
  std::printf("%d ranks, one host (tcp on loopback)\n", world);
  std::printf("%-12s %10s %14s %14s %10s\n", "op", "bytes", "shm us/op", "tcp us/op", "tcp/shm");
  for (const auto& [key, s] : shm) {
    auto it = tcp.find(key);
    if (it == tcp.end()) continue;
    std::printf("%-12s %10lld %14.1f %14.1f %10.2f\n", key.first.c_str(), static_cast<long long>(key.second), s * 1e6,
                it->second * 1e6, it->second / s);
  }
  return shm.empty() || tcp.empty() ? 1 : 0;
}
