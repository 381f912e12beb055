// ModelRunnerWorker: the Worker contract over any Platform's factories. It is
// not part of the SDK's contract: it lives in the model runner library
// (troupe_model_runner, static), which a platform links into its plugin, so its
// members and private helpers never enter the SDK fingerprint. A platform may
// instead bring a Worker of its own (vLLM's worker_cls). It
// asks its platform for the communicator, ops, attention backend and device
// allocator (never builds them itself), builds the model through
// ModelRegistry, and runs one forward pass per step, copying logits out of
// device memory when the platform's memory is not the host's. One rank per
// process: rank r of tensor_parallel_size x pipeline_parallel_size is tensor
// rank r % tp of pipeline stage r / tp; every rank runs every step in lock step.
// Platforms derive from it for their memory budget, KV dtypes and warm-up.
// It offers sleep mode (SleepModeExtension) on any platform: sleeping frees the
// model (its device weights and activations) and the KV cache; waking builds
// them again from the model source, which stays mapped in host memory.
// It offers LoRA (LoraExtension) on any platform whose model supports it: the
// adapters live in the platform's memory (LoraAdapterSet) and the model reads
// them through ModelContext::loras. LoRA over ranks (tensor or pipeline
// parallelism) is refused as not implemented yet.
// When the step asks for it (ExecuteModelRequest::token_selection) and the
// platform's memory is not the host's, the driver chooses the tokens on the
// device (the named op select_tokens) and copies out only their ids; a platform that does
// not offer it has its logits copied out as before.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/attention.hpp"
#include "troupe/communicator.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/extensions.hpp"
#include "troupe/lora.hpp"
#include "troupe/model_runner/lora_adapter_set.hpp"
#include "troupe/model_runner/settings.hpp"
#include "troupe/metered_communicator.hpp"
#include "troupe/ops.hpp"
#include "troupe/platform.hpp"
#include "troupe/worker.hpp"

namespace troupe {

class ModelRunnerWorker : public Worker, public SleepModeExtension, public LoraExtension {
 public:
  /// `platform` makes this worker's parts; it must outlive the worker (the host keeps
  /// platforms for the life of the process). The worker keeps a copy of `config`.
  ModelRunnerWorker(const ConfigView& config, int rank, const Platform& platform);
  ~ModelRunnerWorker() override;

  Status init_device() override;
  Status load_model(const ModelSource& source) override;
  Result<KvCacheSpec> get_kv_cache_spec() const override;
  /// "cache.kv_cache_memory_bytes" when set; otherwise the share memory_utilization of
  /// the device's total memory less what is in use now (vLLM's rule), from memory_info().
  Result<int64_t> determine_available_memory() override;
  Status initialize_from_config(const KvCacheConfig& config) override;
  /// One dummy step: pages the weights in and warms the kernels.
  Status compile_or_warm_up_model() override;
  Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest& request) override;
  /// Keeps the output's buffers for the next step (no logits allocation per step).
  void recycle_output(ModelRunnerOutput&& used) override;
  const ModelInfo* model_info() const override { return model_ ? &model_->info() : nullptr; }
  /// Runs a batch of dummy tokens (dummy_batch()).
  Status execute_dummy_batch();
  /// The batch execute_dummy_batch runs: one sequence of min(block_size,
  /// max_num_batched_tokens) tokens (token 0) in block 0. Public so that a platform's tests
  /// can check it against a cache geometry without a device.
  static ForwardBatch dummy_batch(int block_size, int64_t max_num_batched_tokens);
  /// SleepModeExtension and (with "lora.enable_lora") LoraExtension.
  void* get_extension(std::string_view name) override;

  /// Level 1: frees the model's device memory (weights, activations) and the KV cache; the
  /// weights stay in host memory (the mapped file). Level 2 also lets the host drop the
  /// mapped weights (ModelSource::release_pages), so they come back from the file. Sleeping
  /// again at a level at or below the current one is a no-op.
  Status sleep(int level) override;
  /// Builds again what sleep() freed: "weights" (the model), "kv_cache" (an empty cache of
  /// the last geometry), or both when `tags` is empty. The KV cache's contents are gone.
  Status wake_up(const std::vector<std::string>& tags) override;
  /// 0 when awake, else the level of the last sleep() not yet fully woken from.
  int sleep_level() const { return sleep_level_; }

  /// LoRA: checks `adapter` against the loaded model ("lora.max_lora_rank" included) and
  /// copies it into device memory. The adapters survive sleep and wake_up.
  Status add_lora(int64_t lora_id, const LoraAdapterSpec& adapter) override;
  Status remove_lora(int64_t lora_id) override;
  Result<std::vector<int64_t>> list_loras() const override;
  Status pin_lora(int64_t lora_id) override;

 protected:
  /// The KV cache element type for "cache.cache_dtype" ("auto", "fp16", "fp32"...).
  /// The default: f16 for "auto", "fp16", "float16", "f16" and "half"; f32 for "fp32",
  /// "float32", "f32" and "float".
  virtual Result<DType> kv_cache_dtype(const std::string& cache_dtype) const;
  /// A line about the device for the start-up log ("8 threads, kernels avx2").
  virtual std::string describe_device() const;

  /// The model's forward pass writing logits of batch.logits_indices into `out`, or
  /// nothing when out is null (ranks that do not sample). A platform may run it another
  /// way (a captured CUDA graph) as long as `out` gets exactly what the model writes.
  virtual Status run_forward(const ForwardBatch& batch, float* out);

  /// The engine's settings (a copy of the view the platform was given), and those this
  /// worker reads, typed.
  const ConfigView& config() const { return config_; }
  const RunnerSettings& settings() const { return settings_; }
  const Platform& platform() const { return platform_; }
  Model* model() const { return model_.get(); }
  Ops* ops() const { return ops_.get(); }
  int rank() const { return rank_; }
  DeviceAllocator* allocator() const { return allocator_.get(); }
  AttentionBackend* attention() const { return attention_.get(); }

 private:
  Status check_awake() const;
  Status copy_out(std::vector<float>& host, int64_t count, Status (Model::*run)(const ForwardBatch&, float*),
                  const ForwardBatch& batch);
  /// The driver's step when memory is not the host's: logits into device_out_, then either
  /// tokens chosen on the device (out.sampled_token_ids) or the logits copied out.
  Status forward_on_device(const ExecuteModelRequest& request, ModelRunnerOutput& out);

  ConfigValues config_;
  RunnerSettings settings_;
  int rank_;
  const Platform& platform_;
  std::unique_ptr<DeviceAllocator> allocator_;  // from platform_.make_allocator
  std::unique_ptr<Ops> ops_;                    // from platform_.make_ops
  std::unique_ptr<AttentionBackend> attention_; // from platform_.make_attention_backend
  int tp_rank_ = 0, pp_rank_ = 0;               // rank_ = pp_rank_ * tensor_parallel_size + tp_rank_
  std::shared_ptr<CommunicatorMeter> meter_;     // what comm_ and tp_comm_ moved in the current step
  std::unique_ptr<DeviceCommunicator> comm_;    // every rank; from platform_.make_device_communicator
  std::unique_ptr<DeviceCommunicator> tp_comm_; // this pipeline stage's ranks (pp > 1): comm_->new_group
  std::unique_ptr<Model> model_;                // points at the members above: declared after them
  DeviceArray<float> device_out_;               // logits or hidden states when memory is not the host's
  DeviceArray<int32_t> device_tokens_;          // tokens chosen on the device (token_selection)
  std::vector<float> spare_logits_;             // a recycled output's buffers, reused by the next step
  std::vector<float> spare_hidden_;
  // Sleep mode: what load_model and the KV cache were given, to build them again.
  const ModelSource* source_ = nullptr;         // owned by the caller of load_model, which outlives this
  std::optional<KvCacheConfig> kv_config_;
  int sleep_level_ = 0;
  LoraAdapterSet loras_;                        // ModelContext::loras when "lora.enable_lora"
  bool weights_asleep_ = false, kv_asleep_ = false;
};

}  // namespace troupe
