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

troupe::Status SimPlatform::check_and_update_config(troupe::ConfigEditor& config) const {
  const int64_t tp = config.get_int("parallel.tensor_parallel_size", 1);
  const int64_t pp = config.get_int("parallel.pipeline_parallel_size", 1);
  if (tp != 1 || pp != 1)
    return troupe::invalid_argument("platform sim runs one rank only (tensor_parallel_size " + std::to_string(tp) +
                                    ", pipeline_parallel_size " + std::to_string(pp) +
                                    " were asked): it has no multi-rank communicator");
  if (config.get_string("parallel.worker_cls").empty())
    TROUPE_RETURN_IF_ERROR(config.set("parallel.worker_cls", "sim.SimWorker"));
  if (config.get_int("parallel.num_threads") <= 0)  // its kernels are single-threaded
    TROUPE_RETURN_IF_ERROR(config.set_int("parallel.num_threads", 1));
  if (config.get_int("cache.block_size", 16) <= 0) TROUPE_RETURN_IF_ERROR(config.set_int("cache.block_size", 16));
  TROUPE_RETURN_IF_ERROR(config.set_bool("compilation.enforce_eager", true));
  return config.set("compilation.graph_mode", "none");
}

troupe::Result<std::unique_ptr<troupe::AttentionBackend>> SimPlatform::make_attention_backend(
    const troupe::ConfigView& /*config*/) const {
  return std::unique_ptr<troupe::AttentionBackend>(new SimAttentionBackend(d_));
}

troupe::Result<std::unique_ptr<troupe::Ops>> SimPlatform::make_ops(const troupe::ConfigView& /*config*/) const {
  broken_op();  // logs the deliberately broken op, if any, once
  return std::unique_ptr<troupe::Ops>(new SimOps(d_));
}

troupe::Result<std::unique_ptr<troupe::DeviceAllocator>> SimPlatform::make_allocator(
    const troupe::ConfigView& /*config*/) const {
  return std::unique_ptr<troupe::DeviceAllocator>(new SimAllocator(d_));
}

troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> SimPlatform::make_device_communicator(
    const troupe::ConfigView& parallel, int rank) const {
  const int64_t world =
      parallel.get_int("parallel.tensor_parallel_size", 1) * parallel.get_int("parallel.pipeline_parallel_size", 1);
  if (world != 1 || rank != 0)
    return troupe::not_supported("platform sim has no communicator for rank " + std::to_string(rank) + " of " +
                                 std::to_string(world) + ": it runs a world of one rank only");
  return std::unique_ptr<troupe::DeviceCommunicator>(new SimCommunicator(d_));
}

troupe::Result<std::unique_ptr<troupe::Worker>> SimPlatform::make_worker(const troupe::ConfigView& config,
                                                                         int rank) const {
  const std::string worker_cls = config.get_string("parallel.worker_cls");
  if (!worker_cls.empty() && worker_cls != "sim.SimWorker")
    return troupe::not_found("platform sim has no worker class '" + worker_cls + "'");
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
