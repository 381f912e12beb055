// Temporary: the CPU worker, ops and attention backend arrive with the
// "Real model on the CPU platform plugin" issue; until then they say so.
#include "platforms/cpu/cpu_platform.hpp"

namespace troupe::cpu {

Result<std::unique_ptr<AttentionBackend>> CpuPlatform::make_attention_backend(const EngineConfig&) const {
  return not_supported("the CPU attention backend is not implemented yet");
}
Result<std::unique_ptr<Ops>> CpuPlatform::make_ops(const EngineConfig&) const {
  return not_supported("the CPU ops are not implemented yet");
}
Result<std::unique_ptr<DeviceCommunicator>> CpuPlatform::make_device_communicator(int, int) const {
  return not_supported("the CPU device communicator is not implemented yet");
}
Result<std::unique_ptr<Worker>> CpuPlatform::make_worker(const EngineConfig&, int) const {
  return not_supported("the CPU worker is not implemented yet");
}

}  // namespace troupe::cpu
