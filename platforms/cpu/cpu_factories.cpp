// The CPU platform's factories: worker, ops, attention backend, communicator.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "platforms/cpu/cpu_attention.hpp"
#include "platforms/cpu/cpu_communicator.hpp"
#include "platforms/cpu/cpu_ops.hpp"
#include "platforms/cpu/cpu_platform.hpp"
#include "platforms/cpu/cpu_pool.hpp"
#include "platforms/cpu/cpu_worker.hpp"
#include "platforms/cpu/shm_communicator.hpp"
#include "platforms/cpu/tcp_communicator.hpp"
#include "troupe/model_runner/settings.hpp"

namespace troupe::cpu {

Result<std::unique_ptr<AttentionBackend>> CpuPlatform::make_attention_backend(const ConfigView& config) const {
  auto dtype = cpu_kv_cache_dtype(config.get_string("cache.cache_dtype", "auto"));
  if (!dtype.ok()) return dtype.status();
  return std::unique_ptr<AttentionBackend>(
      new CpuAttentionBackend(process_pool(static_cast<int>(config.get_int("parallel.num_threads")))));
}

Result<std::unique_ptr<Ops>> CpuPlatform::make_ops(const ConfigView& config) const {
  return std::unique_ptr<Ops>(new CpuOps(process_pool(static_cast<int>(config.get_int("parallel.num_threads")))));
}

namespace {

constexpr const char* kIdPrefix = "cpu-shm:";

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

Result<std::string> CpuPlatform::make_communicator_id(const ConfigView& config) const {
  const ParallelSettings parallel = ParallelSettings::from(config);
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1)
    return invalid_argument("a communicator needs tensor_parallel_size and pipeline_parallel_size of at least 1");
  if (parallel.world_size() == 1) return std::string();
  if (!parallel.communicator_host.empty()) {
    // Between hosts: rank 0's listener opens here, now; an id nobody uses is closed later.
    auto timeout = comm_timeout_from_env();
    if (!timeout.ok()) return timeout.status();
    return make_tcp_communicator_id(parallel.communicator_host,
                                    std::max<std::chrono::milliseconds>(*timeout, std::chrono::minutes(10)),
                                    config.get("parallel.communicator_secret").value_or(""));
  }
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                     static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                     (counter.fetch_add(1) << 48);
  char token[64];
  std::snprintf(token, sizeof token, "troupe-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(r));
  return std::string(kIdPrefix) + this_host() + ":" + token;
}

Result<std::unique_ptr<DeviceCommunicator>> CpuPlatform::make_device_communicator(const ConfigView& config,
                                                                                  int rank) const {
  const ParallelSettings parallel = ParallelSettings::from(config);
  const int world = parallel.world_size();
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1 || rank < 0 || rank >= world)
    return invalid_argument("platform cpu: rank " + std::to_string(rank) + " is outside the world of " +
                            std::to_string(world) + " ranks (tensor_parallel_size " +
                            std::to_string(parallel.tensor_parallel_size) + " x pipeline_parallel_size " +
                            std::to_string(parallel.pipeline_parallel_size) + ")");
  if (world == 1) return std::unique_ptr<DeviceCommunicator>(new CpuCommunicator());
  const std::string& id = parallel.communicator_id;
  if (id.empty())
    return invalid_argument("platform cpu needs a communicator id for a world of " + std::to_string(world) +
                            " ranks: the head makes one with Platform::make_communicator_id and sends it to every "
                            "rank in the setting parallel.communicator_id");
  if (id.rfind(kTcpIdPrefix, 0) == 0) {
    auto where = parse_tcp_id(id);
    if (!where.ok()) return Status(where.status().code(), "platform cpu: " + where.status().message());
    auto timeout = comm_timeout_from_env();
    if (!timeout.ok()) return timeout.status();
    TcpOptions o;
    o.id = id;
    o.where = *where;
    o.world_size = world;
    o.rank = rank;
    o.timeout = *timeout;
    o.secret = config.get("parallel.communicator_secret").value_or("");
    auto comm = TcpCommunicator::create(o);
    if (!comm.ok()) return comm.status();
    return std::unique_ptr<DeviceCommunicator>(std::move(*comm));
  }
  const size_t last = id.rfind(':');
  if (id.rfind(kIdPrefix, 0) != 0 || last == std::string::npos || last < std::strlen(kIdPrefix))
    return invalid_argument("platform cpu: '" + id +
                            "' is not a cpu communicator id (cpu-shm:<host>:<name> or cpu-tcp:<host>:<port>:<token>)");
  const std::string host = id.substr(std::strlen(kIdPrefix), last - std::strlen(kIdPrefix));
  const std::string token = id.substr(last + 1);
  if (host != this_host())
    return invalid_argument("platform cpu: shared memory communicator " + id + " was made on host '" + host +
                            "', but rank " + std::to_string(rank) + " runs on host '" + this_host() +
                            "': ranks on several hosts need a cpu-tcp id (make_communicator_id with "
                            "parallel.communicator_host set)");
  if (token.empty() || token.size() > 200 ||
      token.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != std::string::npos)
    return invalid_argument("platform cpu: communicator id '" + id + "' has an invalid name");
  auto timeout = comm_timeout_from_env();
  if (!timeout.ok()) return timeout.status();
  ShmOptions o;
  o.name = "/" + token;
  o.world_size = world;
  o.rank = rank;
  o.timeout = *timeout;
  auto comm = ShmCommunicator::create(o);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<DeviceCommunicator>(std::move(*comm));
}

Result<std::unique_ptr<Worker>> CpuPlatform::make_worker(const ConfigView& config, int rank) const {
  const std::string worker_cls = config.get_string("parallel.worker_cls");
  if (!worker_cls.empty() && worker_cls != "troupe.cpu.CpuWorker")
    return not_found("platform cpu has no worker class '" + worker_cls + "'");
  return std::unique_ptr<Worker>(new CpuWorker(config, rank, *this));
}

}  // namespace troupe::cpu
