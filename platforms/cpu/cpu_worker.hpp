// The CPU worker: a thread pool, the platform's ops and paged attention, the
// model built through ModelRegistry, and one forward pass per step.
#pragma once

#include <memory>

#include "kernels/cpu/thread_pool.hpp"
#include "platforms/cpu/cpu_attention.hpp"
#include "platforms/cpu/cpu_ops.hpp"
#include "troupe/worker.hpp"

namespace troupe::cpu {

class CpuWorker final : public Worker {
 public:
  CpuWorker(const EngineConfig& config, int rank);
  ~CpuWorker() override;

  Status init_device() override;
  Status load_model(const ModelSource& source) override;
  Result<KvCacheSpec> get_kv_cache_spec() const override;
  Result<int64_t> determine_available_memory() override;
  Status initialize_from_config(const KvCacheConfig& config) override;
  Status initialize_cache(int64_t num_blocks) override;
  Status compile_or_warm_up_model() override;
  Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest& request) override;
  const ModelInfo* model_info() const override { return model_ ? &model_->info() : nullptr; }
  Status execute_dummy_batch() override;

 private:
  EngineConfig config_;
  int rank_;
  kernels::cpu::ThreadPool* pool_ = nullptr;  // the process pool for this thread count (cpu_pool.hpp)
  std::unique_ptr<CpuOps> ops_;
  std::unique_ptr<CpuAttentionBackend> attention_;
  std::unique_ptr<Model> model_;
};

}  // namespace troupe::cpu
