// A simple offline generator: loads a GGUF model and its tokenizer, builds the
// platform's worker, sizes the KV cache, then runs one request at a time
// (prefill in chunks of max_num_batched_tokens, then one token per step).
// The actor engine replaces this loop for serving; `troupe generate` uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/gguf/gguf_file.hpp"
#include "runtime/sampling/sampler.hpp"
#include "runtime/sampling/sampling_params.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "troupe/config.hpp"
#include "troupe/platform.hpp"
#include "troupe/worker.hpp"

namespace troupe::generation {

struct GenerateOutput {
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;  // generated ids (a final stop/EOG token included, as vLLM)
  std::string text;                // detokenized output, special tokens and stop strings removed
  std::string finish_reason;       // "stop" or "length"
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

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const gguf::GgufFile& file() const { return *file_; }
  Worker& worker() { return *worker_; }
  const EngineConfig& config() const { return config_; }
  const ModelInfo& model_info() const { return *worker_->model_info(); }
  int64_t max_model_len() const { return max_model_len_; }

 private:
  OfflineGenerator() = default;

  EngineConfig config_;
  std::shared_ptr<const gguf::GgufFile> file_;
  std::unique_ptr<gguf::GgufModelSource> source_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<Worker> worker_;
  int64_t num_blocks_ = 0;
  int64_t max_model_len_ = 0;
  std::vector<int32_t> block_table_;  // blocks 0..n-1: one sequence at a time
  ExecuteModelRequest request_;       // reused across steps
};

}  // namespace troupe::generation
