// A minimal Platform for the plugin-host tests: identity only, every factory
// answers not_supported. TEST_PLATFORM_ENUM / TEST_DEVICE_TYPE pick who it is.
#pragma once

#include "troupe/platform.hpp"

namespace troupe_test {

class TestPlatform final : public troupe::Platform {
 public:
  TestPlatform(troupe::PlatformEnum e, std::string device_type) : enum_(e), device_type_(std::move(device_type)) {}
  troupe::PlatformEnum platform_enum() const override { return enum_; }
  std::string device_type() const override { return device_type_; }
  std::string device_name(int = 0) const override { return "TestDevice(" + device_type_ + ")"; }
  troupe::Status check_and_update_config(troupe::ConfigEditor& config) const override {
    return config.set("extra.test_platform", device_type_);
  }
  troupe::Result<std::unique_ptr<troupe::AttentionBackend>> make_attention_backend(
      const troupe::ConfigView&) const override {
    return troupe::not_supported("test platform");
  }
  troupe::Result<std::unique_ptr<troupe::Ops>> make_ops(const troupe::ConfigView&) const override {
    return troupe::not_supported("test platform");
  }
  troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> make_device_communicator(
      const troupe::ConfigView&, int) const override {
    return troupe::not_supported("test platform");
  }
  troupe::Result<std::unique_ptr<troupe::Worker>> make_worker(const troupe::ConfigView&, int) const override {
    return troupe::not_supported("test platform");
  }
  troupe::DeviceMemory memory_info(int = 0) const override { return {1 << 20, 1 << 20}; }
  std::vector<std::string> supported_quantizations() const override { return {}; }

 private:
  troupe::PlatformEnum enum_;
  std::string device_type_;
};

}  // namespace troupe_test
