// The CPU worker: the SDK's ModelRunnerWorker over the CPU platform (host
// memory, the process's thread pool), with the CPU's own KV cache budget.
#pragma once

#include <string>

#include "troupe/model_runner/model_runner_worker.hpp"

namespace troupe::cpu {

class CpuWorker final : public ModelRunnerWorker {
 public:
  CpuWorker(const ConfigView& config, int rank, const Platform& platform)
      : ModelRunnerWorker(config, rank, platform) {}

  /// TROUPE_CPU_KVCACHE_SPACE (GiB, like vLLM's VLLM_CPU_KVCACHE_SPACE) when set, else
  /// "cache.kv_cache_memory_bytes", else half the free memory up to 1 GiB.
  Result<int64_t> determine_available_memory() override;

 protected:
  Result<DType> kv_cache_dtype(const std::string& cache_dtype) const override;
  std::string describe_device() const override;
};

}  // namespace troupe::cpu
