// The offline generator: EngineCore plus an in-process executor over one
// WorkerRunner, with no actors. It loads a GGUF model and its tokenizer,
// builds the platform's worker, sizes the KV cache and generates one request
// at a time (benchmarks, golden tests). `troupe generate` and `troupe serve`
// run the same core through the actor engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/in_process_executor.hpp"
#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/rank/runner/worker_runner.hpp"
#include "runtime/protocol/sampling_params.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/platform.hpp"
#include "troupe/worker.hpp"

namespace troupe::generation {

struct GenerateOutput {
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;  // generated ids (a final stop/EOG token included, as vLLM)
  std::string text;                // detokenized output, special tokens and stop strings removed
  FinishReason finish_reason = FinishReason::stop;
};

class OfflineGenerator {
 public:
  /// Open `model_path`, check it against `platform`, build and warm the worker.
  static Result<std::unique_ptr<OfflineGenerator>> create(Platform& platform, EngineConfig config,
                                                          const std::string& model_path);
  ~OfflineGenerator();

  /// Generate from already tokenized ids (BOS, if wanted, included).
  Result<GenerateOutput> generate(const std::vector<int32_t>& prompt_ids, const sampling::SamplingParams& params);
  /// Tokenize `prompt` (add_special: BOS as llama.cpp; control-token text parsed) and generate.
  Result<GenerateOutput> generate_text(const std::string& prompt, const sampling::SamplingParams& params);

  const tokenizer::Tokenizer& tokenizer() const { return *artifacts_.tokenizer; }
  Worker& worker() { return runner_->worker(); }
  const EngineConfig& config() const { return config_; }
  const ModelInfo& model_info() const { return runner_->init_reply().info; }
  int64_t max_model_len() const { return max_model_len_; }
  /// Speculative decoding (config.speculative): drafts verified and accepted since creation.
  const SpecDecodingStats& spec_decoding_stats() const { return spec_; }

 private:
  OfflineGenerator() = default;

  EngineConfig config_;
  engine::ModelArtifacts artifacts_;
  std::unique_ptr<engine::InProcessExecutor> executor_;
  engine::WorkerRunner* runner_ = nullptr;  // the executor's driver rank
  std::unique_ptr<engine::EngineCore> core_;
  std::vector<engine::RequestOutput> outputs_;  // the sink's deltas since the last generate() looked
  SpecDecodingStats spec_;                      // summed over every step
  int64_t max_model_len_ = 0;
  uint64_t next_request_ = 0;
};

}  // namespace troupe::generation
