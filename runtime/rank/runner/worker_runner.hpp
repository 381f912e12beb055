// One rank of a model, without actors: the platform's Worker, the model file
// it reads, and (on the driver rank only) the sampling state of each request.
// The worker actor is a mailbox around it; the in-process executor calls it
// directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/rank/runner/logits_processing.hpp"
#include "runtime/rank/runner/structured_outputs.hpp"
#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/model_files/source/model_source.hpp"
#include "runtime/rank/spec_decode/ngram_proposer.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/platform.hpp"
#include "troupe/status.hpp"
#include "troupe/worker.hpp"

namespace troupe::engine {

/// The rank that samples; every other rank only runs the model.
inline constexpr int32_t kDriverRank = 0;

class WorkerRunner {
 public:
  /// Make `platform`'s worker for `rank`, bind it to its device and load the
  /// model file named by config.model.model_path. The driver rank also makes
  /// the logits processors of config.model.logits_processors.
  static Result<std::unique_ptr<WorkerRunner>> create(const Platform& platform, const EngineConfig& config,
                                                      int32_t rank);
  ~WorkerRunner();

  const WorkerInitReply& init_reply() const { return init_reply_; }
  /// The KV geometry the model needs and the bytes this rank can give it.
  Result<KvSizing> kv_sizing();
  /// Allocate the KV cache the engine decided on.
  Status initialize_cache(const KvCacheSpec& spec, int64_t num_blocks);
  Status warm_up();
  /// Run one step; the driver rank also applies the logits processors and
  /// samples a token for each sample_ids row. With speculative decoding it verifies each
  /// row's drafts (runtime/rank/sampling/rejection_sampler.hpp), then asks the drafter for
  /// the next step's drafts (through its DraftTokensExtension interface).
  Result<StepOutput> execute(StepInput input);
  /// Sleep mode (the worker's SleepModeExtension): the resident bytes of this process the
  /// sleep freed (it may be 0 or less when the memory was never touched).
  Result<int64_t> sleep(int level);
  Status wake_up(const std::vector<std::string>& tags);
  /// LoRA (the worker's LoraExtension): reads the adapter file at `path` on this rank
  /// (runtime/rank/lora/lora_file.hpp) and hands it to the worker, which checks it against the model.
  Status add_lora(int64_t lora_id, const std::string& path);
  Status remove_lora(int64_t lora_id);

  int32_t rank() const { return rank_; }
  bool is_driver() const { return rank_ == kDriverRank; }
  Worker& worker() { return *worker_; }

 private:
  WorkerRunner() = default;
  /// request_.token_selection for this step: one row per sampled request when every one of
  /// them can have its token chosen on the device (sampling::device_selection), else empty.
  void plan_device_selection(const StepInput& input);
  Status sample(const StepInput& input, ModelRunnerOutput& result, StepOutput& out);
  /// The tokens the worker chose on the device (result.sampled_token_ids), one per request.
  Status take_device_tokens(const StepInput& input, const ModelRunnerOutput& result, StepOutput& out);
  /// The drafts for each sampled row's next step (drafter_ set).
  Status propose_drafts(const StepInput& input, StepOutput& out);
  Status pool_rows(const StepInput& input, const ModelRunnerOutput& result, StepOutput& out);

  int32_t rank_ = 0;
  bool pooling_runner_ = false;
  PoolingDefaults pooling_defaults_;
  OpenedModel model_;  // the model file or folder the worker reads
  std::unique_ptr<Worker> worker_;
  WorkerInitReply init_reply_;
  std::unordered_map<std::string, SamplingState> requests_;  // driver only: request id → sampling state
  std::unique_ptr<LogitsProcessorChain> processors_;          // driver only, when any is enabled
  std::unique_ptr<spec_decode::NgramDrafter> drafter_;         // driver only, with --speculative-config
  std::unique_ptr<StructuredOutputs> structured_;              // driver only, for generation
  ExecuteModelRequest request_;                               // reused across steps
  std::vector<float> raw_logits_;                             // driver: logits before processors and masks
};

}  // namespace troupe::engine
