// The CPU worker: the platform's ops, attention backend and communicator
// (asked of its Platform, never built here), the model built through
// ModelRegistry, and one forward pass per step. One rank per process: rank r
// of tensor_parallel_size x pipeline_parallel_size is tensor rank r % tp of
// pipeline stage r / tp; every rank runs every step in lock step.
#pragma once

#include <memory>
#include <vector>

#include "troupe/attention.hpp"
#include "troupe/communicator.hpp"
#include "troupe/metered_communicator.hpp"
#include "troupe/ops.hpp"
#include "troupe/platform.hpp"
#include "troupe/worker.hpp"

namespace troupe::cpu {

class CpuWorker final : public Worker {
 public:
  /// `platform` makes this worker's ops, attention backend and communicator; it must
  /// outlive the worker (the host keeps platforms for the life of the process).
  CpuWorker(const EngineConfig& config, int rank, const Platform& platform);
  ~CpuWorker() override;

  Status init_device() override;
  Status load_model(const ModelSource& source) override;
  Result<KvCacheSpec> get_kv_cache_spec() const override;
  Result<int64_t> determine_available_memory() override;
  Status initialize_from_config(const KvCacheConfig& config) override;
  Status initialize_cache(int64_t num_blocks) override;
  Status compile_or_warm_up_model() override;
  Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest& request) override;
  /// Keeps the output's buffers for the next step (no logits allocation per step).
  void recycle_output(ModelRunnerOutput&& used) override;
  const ModelInfo* model_info() const override { return model_ ? &model_->info() : nullptr; }
  Status execute_dummy_batch() override;

 private:
  EngineConfig config_;
  int rank_;
  const Platform& platform_;
  std::unique_ptr<Ops> ops_;                    // from platform_.make_ops
  std::unique_ptr<AttentionBackend> attention_; // from platform_.make_attention_backend
  int tp_rank_ = 0, pp_rank_ = 0;               // rank_ = pp_rank_ * tensor_parallel_size + tp_rank_
  std::shared_ptr<CommunicatorMeter> meter_;     // what comm_ and tp_comm_ moved in the current step
  std::unique_ptr<DeviceCommunicator> comm_;    // every rank; from platform_.make_device_communicator
  std::unique_ptr<DeviceCommunicator> tp_comm_; // this pipeline stage's ranks (pp > 1): comm_->new_group
  std::unique_ptr<Model> model_;                // points at the members above: declared after them
  std::vector<float> spare_logits_;             // a recycled output's buffers, reused by the next step
  std::vector<float> spare_hidden_;
};

}  // namespace troupe::cpu
