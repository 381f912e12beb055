// The CUDA worker: the SDK's ModelRunnerWorker on one CUDA device. Rank r uses
// device r % device_count (one rank per device and process, vLLM's layout on
// one host). Its memory budget is vLLM's: --gpu-memory-utilization of the
// device's total memory, less what is in use once the model is loaded.
// Warm-up runs eager steps of the shapes serving will see (the batches of
// cuda_batches.hpp, which tests check without a GPU), then (unless
// --enforce-eager) captures CUDA graphs of decode batches (CudaGraphRunner) and
// checks a replay against an eager step before trusting them; decode steps then
// replay a graph. Failures recorded by the ops and the attention backend fail
// the step that caused them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "platforms/cuda/cuda_batches.hpp"
#include "platforms/cuda/cuda_context.hpp"
#include "platforms/cuda/cuda_graph_runner.hpp"
#include "platforms/cuda/device_claim.hpp"
#include "troupe/model_runner/model_runner_worker.hpp"

namespace troupe::cuda {

class CudaWorker final : public ModelRunnerWorker {
 public:
  CudaWorker(const ConfigView& config, int rank, const Platform& platform, int device_count);

  /// Claims this rank's device (refused when another rank of this host holds it), makes it
  /// current, then the SDK worker's set-up (its factories use it).
  Status init_device() override;
  /// Refuses a model the device cannot serve (found while building it) with its reason.
  Status load_model(const ModelSource& source) override;
  /// kv_cache_memory_bytes when set; else memory_utilization x total - in use (cudaMemGetInfo)
  /// - what warm-up and serving allocate later (later_allocation_bytes).
  Result<int64_t> determine_available_memory() override;
  /// Eager warm-up: a prefill of max_num_batched_tokens, a one-token decode and a decode of
  /// the largest graph size (kernels loaded, cuBLAS scratch and activations at their largest).
  /// Then the decode graphs, unless "compilation.enforce_eager" or a feature they do not
  /// cover (ranks > 1, LoRA, pooling): captured, and a replay compared with an eager step of
  /// the same batch; a graph that cannot be captured or differs leaves the worker eager, with
  /// a log line.
  Status compile_or_warm_up_model() override;
  /// The SDK's sleep and wake-up with this worker's device current first: the fresh attention
  /// backend (and on wake-up the model and KV cache) are made on the current device.
  Status sleep(int level) override;
  Status wake_up(const std::vector<std::string>& tags) override;
  /// Graphs captured and in use (0 when eager).
  int cuda_graphs() const;
  Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest& request) override;

  int device() const { return device_; }

 protected:
  /// An eligible decode step replays its CUDA graph; anything else runs the model eagerly.
  Status run_forward(const ForwardBatch& batch, float* out) override;
  /// auto/fp16 (f16), bf16, fp32.
  Result<DType> kv_cache_dtype(const std::string& cache_dtype) const override;
  std::string describe_device() const override;

 private:
  int device_;
  std::shared_ptr<DeviceClaim> claim_;  // held for the life of the worker
  std::shared_ptr<CudaContext> ctx_;
  std::unique_ptr<CudaGraphRunner> graphs_;  // null: eager

  /// A replay may differ from the eager step by this share of a row's largest logit.
  static constexpr float kReplayTolerance = 1e-3f;

  BatchGeometry geometry() const;
  /// Whether warm-up will try CUDA graphs (the KV budget keeps their buffers free).
  bool graphs_planned() const;
  /// One eager step of a self-made batch; `what` names it in an error.
  Status run_warm_up(const ForwardBatch& batch, const char* what);
  /// Captures every size and compares a replay with an eager step; the runner stays only
  /// when both succeed.
  Status set_up_graphs();
  Status compare_replay_with_eager(int num_seqs);
};

}  // namespace troupe::cuda
