// The dummy platform and its plugin entry point.
#include "dummy_platform.hpp"

#include "troupe/plugin.hpp"

namespace dummy {

troupe::Status DummyPlatform::check_and_update_config(troupe::ConfigEditor& config) const {
  TROUPE_RETURN_IF_ERROR(config.set("parallel.worker_cls", "dummy.DummyWorker"));
  TROUPE_RETURN_IF_ERROR(config.set_int("cache.block_size", 32));
  TROUPE_RETURN_IF_ERROR(config.set("compilation.graph_mode", "none"));
  return config.set("extra.dummy_platform", "configured");
}

// The dummy device cannot compute: every factory says so instead of pretending.
troupe::Result<std::unique_ptr<troupe::AttentionBackend>> DummyPlatform::make_attention_backend(
    const troupe::ConfigView& /*config*/) const {
  return troupe::not_supported("attention is not implemented by the example platform dummy");
}
troupe::Result<std::unique_ptr<troupe::Ops>> DummyPlatform::make_ops(const troupe::ConfigView& /*config*/) const {
  return troupe::not_supported("compute ops are not implemented by the example platform dummy");
}
troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> DummyPlatform::make_device_communicator(
    const troupe::ConfigView& /*parallel*/, int /*rank*/) const {
  return troupe::not_supported("a device communicator is not implemented by the example platform dummy");
}
troupe::Result<std::unique_ptr<troupe::Worker>> DummyPlatform::make_worker(const troupe::ConfigView& config,
                                                                           int /*rank*/) const {
  return troupe::not_supported("worker " + config.get_string("parallel.worker_cls") +
                               " is not implemented by the example platform dummy");
}

troupe::DeviceMemory DummyPlatform::memory_info(int /*device_id*/) const {
  constexpr int64_t kGiB = 1LL << 30;
  return {16 * kGiB, 16 * kGiB};  // a pretend 16 GiB device
}

}  // namespace dummy

namespace {
// The dummy device is always "present"; a real plugin would look for its hardware
// here and return nullptr when there is none, saying why in *why_not.
troupe::Platform* probe_dummy(std::string* /*why_not*/) { return new dummy::DummyPlatform(); }
}  // namespace

TROUPE_PLUGIN(troupe::platform_plugin("dummy", &probe_dummy))
