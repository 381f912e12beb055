// The CPU platform: AVX2/FMA kernels with a scalar fallback, a paged KV cache
// in host memory, and a worker that runs models on the cores of this machine.
#pragma once

#include "troupe/platform.hpp"

namespace troupe::cpu {

class CpuPlatform final : public Platform {
 public:
  /// The largest world (tensor_parallel_size x pipeline_parallel_size) of CPU ranks.
  static constexpr int kMaxCpuRanks = 64;

  PlatformEnum platform_enum() const override { return PlatformEnum::cpu; }
  std::string device_type() const override { return "cpu"; }
  std::string device_name(int device_id = 0) const override;
  Status check_and_update_config(ConfigEditor& config) const override;
  Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const ConfigView& config) const override;
  Result<std::unique_ptr<Ops>> make_ops(const ConfigView& config) const override;
  /// parallel.communicator_host empty: "cpu-shm:<host>:troupe-<pid>-<random>", a shared
  /// memory segment on this host. Else "cpu-tcp:<communicator_host>:<port>:<token>": opens a
  /// listener there, in this process, for rank 0 (which must then run in this process).
  Result<std::string> make_communicator_id(const ConfigView& parallel) const override;
  /// World of 1: a local communicator. A cpu-shm id: a ShmCommunicator (the id must name this
  /// host); a cpu-tcp id: a TcpCommunicator.
  Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ConfigView& parallel,
                                                                       int rank) const override;
  Result<std::unique_ptr<Worker>> make_worker(const ConfigView& config, int rank) const override;
  DeviceMemory memory_info(int device_id = 0) const override;
  std::vector<std::string> supported_quantizations() const override;
  bool supports(std::string_view capability) const override;
};

}  // namespace troupe::cpu
