// An out-of-tree platform that is the CPU platform in every respect but one:
// its check_and_update_config chooses the scheduler policy "priority", as a
// platform plugin may (vllm-spyre's platform sets its own scheduler class).
// Out of tree, it wins automatic platform selection over the built-in CPU.
#include "platforms/cpu/cpu_platform.hpp"
#include "troupe/plugin.hpp"

namespace {

class SchedCpuPlatform final : public troupe::Platform {
 public:
  troupe::PlatformEnum platform_enum() const override { return troupe::PlatformEnum::out_of_tree; }
  std::string device_type() const override { return cpu_.device_type(); }
  std::string device_name(int id) const override { return cpu_.device_name(id); }
  troupe::Status check_and_update_config(troupe::ConfigEditor& config) const override {
    TROUPE_RETURN_IF_ERROR(cpu_.check_and_update_config(config));
    return config.set("scheduler.scheduler_cls", "priority");
  }
  troupe::Result<std::unique_ptr<troupe::AttentionBackend>> make_attention_backend(
      const troupe::ConfigView& config) const override {
    return cpu_.make_attention_backend(config);
  }
  troupe::Result<std::unique_ptr<troupe::Ops>> make_ops(const troupe::ConfigView& config) const override {
    return cpu_.make_ops(config);
  }
  troupe::Result<std::string> make_communicator_id(const troupe::ConfigView& parallel) const override {
    return cpu_.make_communicator_id(parallel);
  }
  troupe::Result<std::unique_ptr<troupe::DeviceCommunicator>> make_device_communicator(
      const troupe::ConfigView& parallel, int rank) const override {
    return cpu_.make_device_communicator(parallel, rank);
  }
  troupe::Result<std::unique_ptr<troupe::Worker>> make_worker(const troupe::ConfigView& config,
                                                              int rank) const override {
    return cpu_.make_worker(config, rank);
  }
  troupe::DeviceMemory memory_info(int id) const override { return cpu_.memory_info(id); }
  std::vector<std::string> supported_quantizations() const override { return cpu_.supported_quantizations(); }
  troupe::Status verify_quantization(std::string_view quant) const override { return cpu_.verify_quantization(quant); }
  bool supports(std::string_view capability) const override { return cpu_.supports(capability); }

 private:
  troupe::cpu::CpuPlatform cpu_;
};

troupe::Platform* probe(std::string* /*why_not*/) { return new SchedCpuPlatform(); }

}  // namespace

TROUPE_PLUGIN(troupe::platform_plugin("sched_cpu", &probe))
