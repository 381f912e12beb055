// The CUDA platform: one worker per rank on its own device (CudaWorker), the
// kernels of kernels/cuda behind Ops (CudaOps), a paged KV cache in device
// memory (CudaAttentionBackend), device memory through CudaAllocator, and NCCL
// between ranks (NcclCommunicator; a world of one rank needs no NCCL).
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
  /// Worker class, block size 16, KV cache f16 unless asked otherwise, eager execution
  /// (no CUDA graphs yet).
  Status check_and_update_config(ConfigEditor& config) const override;
  Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const ConfigView& config) const override;
  /// On the device current on the calling thread (CudaWorker::init_device sets it).
  Result<std::unique_ptr<Ops>> make_ops(const ConfigView& config) const override;
  /// cudaMalloc'd memory of the current device.
  Result<std::unique_ptr<DeviceAllocator>> make_allocator(const ConfigView& config) const override;
  /// "" for a world of 1; otherwise a fresh ncclUniqueId as "nccl:<hex>" (NCCL's bootstrap
  /// root then runs in this process, which must live until every rank has joined).
  Result<std::string> make_communicator_id(const ConfigView& parallel) const override;
  /// A world of 1: device copies. Otherwise an NCCL communicator at parallel.communicator_id.
  Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ConfigView& parallel,
                                                                       int rank) const override;
  Result<std::unique_ptr<Worker>> make_worker(const ConfigView& config, int rank) const override;
  /// cudaMemGetInfo on `device_id`.
  DeviceMemory memory_info(int device_id = 0) const override;
  /// Exactly the weight types the CUDA kernels compute (kernels::cuda::supports_weight_type).
  std::vector<std::string> supported_quantizations() const override;
  bool supports(std::string_view capability) const override;

 private:
  int device_count_;
};

}  // namespace troupe::cuda
