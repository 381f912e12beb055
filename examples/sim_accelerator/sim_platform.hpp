// SimPlatform: a simulated accelerator, a real device from the core's point of
// view. Its memory (SimDevice) cannot be read by the core, copies are explicit,
// its kernels run CPU code on its own memory, and its identity is its own
// (device type "sim", PlatformEnum::out_of_tree). One rank per process.
#pragma once

#include "sim_device.hpp"
#include "troupe/model_runner/model_runner_worker.hpp"
#include "troupe/platform.hpp"

namespace sim {

class SimPlatform final : public troupe::Platform {
 public:
  explicit SimPlatform(SimDevice& device) : d_(device) {}
  troupe::PlatformEnum platform_enum() const override { return troupe::PlatformEnum::out_of_tree; }
  std::string device_type() const override { return "sim"; }
  std::string device_name(int device_id = 0) const override;
  /// The sim worker, block size 16 unless set, eager steps; a world of more than one rank is refused.
  troupe::Status check_and_update_config(troupe::ConfigEditor& config) const override;
  troupe::Result<std::unique_ptr<troupe::AttentionBackend>> make_attention_backend(
      const troupe::ConfigView& config) const override;
  troupe::Result<std::unique_ptr<troupe::Ops>> make_ops(const troupe::ConfigView& config) const override;
  troupe::Result<std::unique_ptr<troupe::DeviceAllocator>> make_allocator(
      const troupe::ConfigView& config) const override;
  troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> make_device_communicator(
      const troupe::ConfigView& parallel, int rank) const override;
  troupe::Result<std::unique_ptr<troupe::Worker>> make_worker(const troupe::ConfigView& config,
                                                              int rank) const override;
  troupe::DeviceMemory memory_info(int device_id = 0) const override;
  /// Exactly the weight types its kernels read.
  std::vector<std::string> supported_quantizations() const override { return {"f32", "f16", "bf16"}; }
  bool supports(std::string_view capability) const override {
    return capability == "prefix_caching" || capability == "chunked_prefill";
  }

 private:
  SimDevice& d_;
};

/// The SDK's worker over the sim's parts; it only describes the device differently.
class SimWorker final : public troupe::ModelRunnerWorker {
 public:
  SimWorker(const troupe::ConfigView& config, int rank, const SimPlatform& platform)
      : ModelRunnerWorker(config, rank, platform) {}

 protected:
  std::string describe_device() const override;
};

}  // namespace sim
