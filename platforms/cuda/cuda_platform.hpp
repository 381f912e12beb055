// The CUDA platform: identity, device queries and config defaults. The
// compute side (worker, ops, attention, NCCL communicator) is not written
// yet: those factories answer not_supported, naming the platform.
#pragma once

#include "troupe/platform.hpp"

namespace troupe::cuda {

class CudaPlatform final : public Platform {
 public:
  explicit CudaPlatform(int device_count) : device_count_(device_count) {}

  PlatformEnum platform_enum() const override { return PlatformEnum::cuda; }
  std::string device_type() const override { return "cuda"; }
  /// cudaGetDeviceProperties(...).name, e.g. "NVIDIA H200".
  std::string device_name(int device_id = 0) const override;
  int device_count() const override { return device_count_; }
  Status check_and_update_config(EngineConfig& config) const override;
  Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const EngineConfig& config) const override;
  Result<std::unique_ptr<Ops>> make_ops(const EngineConfig& config) const override;
  Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ParallelConfig& parallel,
                                                                       int rank) const override;
  Result<std::unique_ptr<Worker>> make_worker(const EngineConfig& config, int rank) const override;
  /// cudaMemGetInfo on `device_id`.
  DeviceMemory memory_info(int device_id = 0) const override;
  std::vector<std::string> supported_dtypes() const override;
  std::vector<std::string> supported_quantizations() const override;
  /// Refuses every weight type until the CUDA worker exists, so that automatic
  /// platform choice passes cuda over (and runs on the CPU) instead of failing.
  Status verify_quantization(std::string_view quant) const override;

 private:
  int device_count_;
};

}  // namespace troupe::cuda
