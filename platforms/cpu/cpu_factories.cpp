// The CPU platform's factories: worker, ops, attention backend, communicator.
#include <string>

#include "platforms/cpu/cpu_attention.hpp"
#include "platforms/cpu/cpu_communicator.hpp"
#include "platforms/cpu/cpu_ops.hpp"
#include "platforms/cpu/cpu_platform.hpp"
#include "platforms/cpu/cpu_pool.hpp"
#include "platforms/cpu/cpu_worker.hpp"

namespace troupe::cpu {

Result<std::unique_ptr<AttentionBackend>> CpuPlatform::make_attention_backend(const EngineConfig& config) const {
  if (config.cache.cache_dtype != "auto" && config.cache.cache_dtype != "float32" && config.cache.cache_dtype != "f32")
    return not_supported("platform cpu stores the KV cache in float32 only, not '" + config.cache.cache_dtype + "'");
  return std::unique_ptr<AttentionBackend>(new CpuAttentionBackend(process_pool(config.parallel.num_threads)));
}

Result<std::unique_ptr<Ops>> CpuPlatform::make_ops(const EngineConfig& config) const {
  return std::unique_ptr<Ops>(new CpuOps(process_pool(config.parallel.num_threads)));
}

Result<std::unique_ptr<DeviceCommunicator>> CpuPlatform::make_device_communicator(const ParallelConfig& parallel,
                                                                                  int rank) const {
  const int world = parallel.world_size();
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1 || rank < 0 || rank >= world)
    return invalid_argument("platform cpu: rank " + std::to_string(rank) + " is outside the world of " +
                            std::to_string(world) + " ranks (tensor_parallel_size " +
                            std::to_string(parallel.tensor_parallel_size) + " x pipeline_parallel_size " +
                            std::to_string(parallel.pipeline_parallel_size) + ")");
  if (world == 1) return std::unique_ptr<DeviceCommunicator>(new CpuCommunicator());
  if (parallel.communicator_id.empty())
    return invalid_argument("platform cpu needs a communicator id for a world of " + std::to_string(world) +
                            " ranks: the head makes one with Platform::make_communicator_id and sends it to every "
                            "rank in config.parallel.communicator_id");
  return not_supported("platform cpu has a communicator for one rank only (rank " + std::to_string(rank) + " of " +
                       std::to_string(world) + ")");
}

Result<std::unique_ptr<Worker>> CpuPlatform::make_worker(const EngineConfig& config, int rank) const {
  if (!config.parallel.worker_cls.empty() && config.parallel.worker_cls != "troupe.cpu.CpuWorker")
    return not_found("platform cpu has no worker class '" + config.parallel.worker_cls + "'");
  return std::unique_ptr<Worker>(new CpuWorker(config, rank, *this));
}

}  // namespace troupe::cpu
