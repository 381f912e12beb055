// DummyPlatform: an out-of-tree platform with no real device, as vLLM's
// dummy platform plugin. It shows what a platform must answer and how
// check_and_update_config steers the engine.
#pragma once

#include "troupe/platform.hpp"

namespace dummy {

class DummyPlatform final : public troupe::Platform {
 public:
  troupe::PlatformEnum platform_enum() const override { return troupe::PlatformEnum::out_of_tree; }
  std::string device_type() const override { return "dummy"; }
  std::string device_name(int /*device_id*/ = 0) const override { return "DummyDevice"; }

  /// Picks the dummy worker and a block size of 32, and marks the config.
  troupe::Status check_and_update_config(troupe::ConfigEditor& config) const override;

  troupe::Result<std::unique_ptr<troupe::AttentionBackend>> make_attention_backend(
      const troupe::ConfigView& config) const override;
  troupe::Result<std::unique_ptr<troupe::Ops>> make_ops(const troupe::ConfigView& config) const override;
  troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> make_device_communicator(
      const troupe::ConfigView& parallel, int rank) const override;
  troupe::Result<std::unique_ptr<troupe::Worker>> make_worker(const troupe::ConfigView& config,
                                                              int rank) const override;

  troupe::DeviceMemory memory_info(int device_id = 0) const override;
  std::vector<std::string> supported_quantizations() const override { return {"f32"}; }
};

}  // namespace dummy
