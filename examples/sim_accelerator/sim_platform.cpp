// The sim platform, its worker and the plugin entry point.
#include "sim_platform.hpp"

#include "sim_attention.hpp"
#include "sim_communicator.hpp"
#include "sim_memory.hpp"
#include "sim_ops.hpp"
#include "troupe/plugin.hpp"

namespace sim {

std::string SimPlatform::device_name(int /*device_id*/) const {
  return "troupe simulated accelerator (" + std::to_string(d_.capacity() >> 20) + " MiB)";
}

troupe::Status SimPlatform::check_and_update_config(troupe::EngineConfig& config) const {
  const troupe::ParallelConfig& p = config.parallel;
  if (p.tensor_parallel_size != 1 || p.pipeline_parallel_size != 1)
    return troupe::invalid_argument("platform sim runs one rank only (tensor_parallel_size " +
                                    std::to_string(p.tensor_parallel_size) + ", pipeline_parallel_size " +
                                    std::to_string(p.pipeline_parallel_size) + " were asked): it has no multi-rank "
                                    "communicator");
  if (config.parallel.worker_cls.empty()) config.parallel.worker_cls = "sim.SimWorker";
  if (config.parallel.num_threads <= 0) config.parallel.num_threads = 1;  // its kernels are single-threaded
  if (config.cache.block_size <= 0) config.cache.block_size = 16;
  config.compilation.enforce_eager = true;
  config.compilation.graph_mode = "none";
  return {};
}

troupe::Result<std::unique_ptr<troupe::AttentionBackend>> SimPlatform::make_attention_backend(
    const troupe::EngineConfig& /*config*/) const {
  return std::unique_ptr<troupe::AttentionBackend>(new SimAttentionBackend(d_));
}

troupe::Result<std::unique_ptr<troupe::Ops>> SimPlatform::make_ops(const troupe::EngineConfig& /*config*/) const {
  broken_op();  // logs the deliberately broken op, if any, once
  return std::unique_ptr<troupe::Ops>(new SimOps(d_));
}

troupe::Result<std::unique_ptr<troupe::DeviceAllocator>> SimPlatform::make_allocator(
    const troupe::EngineConfig& /*config*/) const {
  return std::unique_ptr<troupe::DeviceAllocator>(new SimAllocator(d_));
}

troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> SimPlatform::make_device_communicator(
    const troupe::ParallelConfig& parallel, int rank) const {
  if (parallel.world_size() != 1 || rank != 0)
    return troupe::not_supported("platform sim has no communicator for rank " + std::to_string(rank) + " of " +
                                 std::to_string(parallel.world_size()) + ": it runs a world of one rank only");
  return std::unique_ptr<troupe::DeviceCommunicator>(new SimCommunicator(d_));
}

troupe::Result<std::unique_ptr<troupe::Worker>> SimPlatform::make_worker(const troupe::EngineConfig& config,
                                                                         int rank) const {
  if (!config.parallel.worker_cls.empty() && config.parallel.worker_cls != "sim.SimWorker")
    return troupe::not_found("platform sim has no worker class '" + config.parallel.worker_cls + "'");
  return std::unique_ptr<troupe::Worker>(new SimWorker(config, rank, *this));
}

troupe::DeviceMemory SimPlatform::memory_info(int /*device_id*/) const {
  return {d_.capacity(), d_.capacity() - d_.used()};
}

std::string SimWorker::describe_device() const {
  return platform().device_name(0) + ", single-threaded CPU kernels";
}

}  // namespace sim

namespace {
// The simulated device is present whenever its memory can be mapped.
troupe::Platform* probe_sim(std::string* why_not) {
  sim::SimDevice* device = sim::SimDevice::get(why_not);
  return device ? new sim::SimPlatform(*device) : nullptr;
}
}  // namespace

TROUPE_PLUGIN(troupe::platform_plugin("sim", &probe_sim))
