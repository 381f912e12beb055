// Worker: one per rank, hosted by a worker actor. Mirrors vLLM's
// WorkerBase: device set-up, model loading, KV cache sizing and the step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/attention.hpp"
#include "troupe/config_view.hpp"
#include "troupe/model.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// One step for the worker: the batch the scheduler chose.
struct ExecuteModelRequest {
  ForwardBatch batch;
  /// The pooling runner: the final hidden states of every token row, instead of logits.
  bool return_hidden_states = false;
  /// Empty, or one entry per logits row: the driver may then choose those rows' tokens on
  /// the device (the named op select_tokens) and return sampled_token_ids instead of logits. Set
  /// only for rows the host sampler would treat the same (no penalties, no logprobs).
  std::vector<TokenSelection> token_selection;
};

/// What one step produced: logits of the rows the batch asked for, or (when
/// asked for) the hidden states of every row.
struct ModelRunnerOutput {
  int64_t vocab_size = 0;
  std::vector<float> logits;         // [batch.logits_indices.size()][vocab_size]
  int64_t hidden_size = 0;
  std::vector<float> hidden_states;  // [batch.num_tokens()][hidden_size], with return_hidden_states
  /// One token per logits row when the worker chose them on the device (token_selection);
  /// `logits` is then empty.
  std::vector<int32_t> sampled_token_ids;
  /// This rank's communication in the step: payload bytes through its communicators, time inside them.
  int64_t communicator_bytes = 0;
  double communicator_seconds = 0;
};

/// KV cache geometry decided by the engine from the spec and available memory.
struct KvCacheConfig {
  KvCacheSpec spec;
  int64_t num_blocks = 0;
};

class Worker {
 public:
  /// `platform_name` names the platform in "not supported" errors.
  explicit Worker(std::string platform_name) : platform_name_(std::move(platform_name)) {}
  virtual ~Worker() = default;

  /// Bind this worker to its device (threads, streams, memory pools).
  virtual Status init_device() = 0;
  /// Build the model from the loaded file through ModelRegistry.
  virtual Status load_model(const ModelSource& source) = 0;
  /// The KV cache geometry the loaded model needs.
  virtual Result<KvCacheSpec> get_kv_cache_spec() const = 0;
  /// Bytes this worker can give to the KV cache after the model is loaded.
  virtual Result<int64_t> determine_available_memory() = 0;
  /// Allocate the KV cache the engine decided on (vLLM's initialize_from_config).
  virtual Status initialize_from_config(const KvCacheConfig& config) = 0;
  /// `num_blocks` blocks of get_kv_cache_spec() through initialize_from_config (vLLM's
  /// initialize_cache); a convenience, not a slot.
  Status initialize_cache(int64_t num_blocks);
  /// Warm up kernels / capture graphs before serving.
  virtual Status compile_or_warm_up_model() = 0;
  /// Run one step.
  virtual Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest& request) = 0;
  /// Hands a step's output back once the caller is done with it, so its buffers serve
  /// the next step instead of being allocated again. The default drops it.
  virtual void recycle_output(ModelRunnerOutput&& used);
  /// The loaded model's shapes (valid after load_model).
  virtual const ModelInfo* model_info() const = 0;

  /// Optional features (sleep mode, LoRA, draft tokens, ...) as extension slots: the
  /// interface named `name` (troupe/extensions.hpp) if this worker implements it, else
  /// nullptr (the default). Use find_extension<E>(worker) rather than calling this.
  virtual void* get_extension(std::string_view name);

  const std::string& platform_name() const { return platform_name_; }

 protected:
  Status unsupported(const char* what) const;

 private:
  std::string platform_name_;
};

}  // namespace troupe
