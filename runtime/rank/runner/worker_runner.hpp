// One rank of a model, without actors: the platform's Worker and the model file
// it reads. On the driver rank it also runs each step's per-request work, one
// class per concern: the requests' sampling state (DriverRequests), logits
// processors (LogitsProcessorChain), structured-output masks (StructuredOutputs),
// the choice of tokens (StepSampler), drafts (DraftProposer) and, for a pooling
// model, pooling (RowPooler); execute() is their order. The worker actor is a
// mailbox around it; the in-process executor calls it directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/model_files/source/model_source.hpp"
#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/rank/runner/draft_proposer.hpp"
#include "runtime/rank/runner/driver_requests.hpp"
#include "runtime/rank/runner/logits_processing.hpp"
#include "runtime/rank/runner/pooling.hpp"
#include "runtime/rank/runner/step_sampler.hpp"
#include "runtime/rank/runner/structured_outputs.hpp"
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
  /// its per-request parts: the logits processors of config.model.logits_processors,
  /// the sampler and structured outputs (or the pooler), the drafter.
  static Result<std::unique_ptr<WorkerRunner>> create(const Platform& platform, const EngineConfig& config,
                                                      int32_t rank);
  ~WorkerRunner();

  const WorkerInitReply& init_reply() const { return init_reply_; }
  /// The KV geometry the model needs and the bytes this rank can give it.
  Result<KvSizing> kv_sizing();
  /// Allocate the KV cache the engine decided on.
  Status initialize_cache(const KvCacheSpec& spec, int64_t num_blocks);
  Status warm_up();
  /// Run one step; the driver rank also chooses a token for each sample_ids request
  /// (processors and structured-output masks applied first) or pools its rows. With
  /// speculative decoding it verifies each request's drafts, then proposes the next step's.
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
  /// The platform's worker for this rank, bound to its device, with the model loaded.
  Status load(const Platform& platform, const EngineConfig& config);
  /// The driver rank's per-request concerns, as `config` asks for them.
  Status make_driver_parts(const EngineConfig& config);
  /// The step's finished requests forgotten and its new (or resumed) ones added, by every concern.
  Status update_requests(StepInput& input);
  /// The driver's part after the model: pooling, or each sampled request's tokens, then drafts.
  Status finish_step(const StepInput& input, ModelRunnerOutput& result, StepOutput& out);
  /// Tokens from the logits: a copy kept for logprobs, processors, masks, then sampling.
  Status sample_from_logits(const StepInput& input, ModelRunnerOutput& result, StepOutput& out);
  /// Whether a row with logprobs gets changed by processors or a mask (its logprobs stay the model's).
  bool needs_raw_logits(const StepInput& input) const;
  Status apply_processors(const StepInput& input, size_t rows, ModelRunnerOutput& result);

  int32_t rank_ = 0;
  bool pooling_runner_ = false;
  OpenedModel model_;  // the model file or folder the worker reads
  std::unique_ptr<Worker> worker_;
  WorkerInitReply init_reply_;
  ExecuteModelRequest request_;  // reused across steps
  // The driver rank's parts (none on other ranks).
  DriverRequests requests_;
  std::unique_ptr<RowPooler> pooler_;                 // a pooling model
  std::unique_ptr<StepSampler> sampler_;              // a generation model
  std::unique_ptr<LogitsProcessorChain> processors_;  // generation, when any is enabled
  std::unique_ptr<StructuredOutputs> structured_;     // generation
  std::unique_ptr<DraftProposer> drafter_;            // generation, with --speculative-config
  TokenMasks masks_;                                  // this step's, from structured_
  std::vector<float> raw_logits_;                     // logits before processors and masks
};

}  // namespace troupe::engine
