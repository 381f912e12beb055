// Admission (vLLM's input processor): the one place where a GenerateRequest
// becomes a CoreRequest. It checks the request against the runner, the
// sampling parameter ranges (SamplingParams::validate), the scheduler policy,
// the model (pooling dimensions, vocabulary, context length) and the queue
// cap; tokenizes and truncates the prompt; assigns the request id and seed;
// resolves a LoRA adapter's name; and asks the logits processors whether
// they accept the request's arguments. Everything a step would otherwise
// fail on is refused here, before the request reaches the scheduler: a step
// that fails fails every request in it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/rank/runner/logits_processing.hpp"
#include "runtime/core/engine_core/lora_registry.hpp"
#include "runtime/protocol/request_types.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/model.hpp"
#include "troupe/scheduler_policy.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

struct InputProcessorSetup {
  /// The engine's configuration once start-up finished (max_model_len is the KV plan's).
  EngineConfig config;
  ModelInfo model_info;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  /// The scheduler policy (--scheduler-cls); null: one that uses no priorities.
  std::shared_ptr<const SchedulerPolicy> policy;
  /// The engine process's own logits-processor chain, for their argument checks; null: none.
  const LogitsProcessorChain* processors = nullptr;
  /// The LoRA adapters requests may name; null: LoRA is off (any name is unknown).
  std::shared_ptr<LoraRegistry> loras;
  /// Draws the seeds of requests that bring none (the engine seeds it from config.model.seed).
  std::mt19937_64 seeds;
};

/// An admitted request: what the engine core takes, and the hold on its LoRA
/// adapter (null for the base model), to keep until the request finished.
struct AdmittedRequest {
  CoreRequest request;
  std::shared_ptr<LoraRegistry::Lease> lora;
};

class InputProcessor {
 public:
  explicit InputProcessor(InputProcessorSetup setup);

  /// Admit `request` while `in_flight` requests are unfinished. A refusal is
  /// the Status to report (invalid_argument or out_of_range for the request,
  /// not_found for an unknown adapter, resource_exhausted for a full queue);
  /// `field`, when given, is set to the request field at fault ("" for none),
  /// named as the OpenAI API names it.
  Result<AdmittedRequest> process(GenerateRequest request, int64_t in_flight, std::string* field = nullptr);

  /// Token ids are in [0, vocab_size()): the smaller of the tokenizer's and the model's vocabulary.
  int64_t vocab_size() const { return vocab_size_; }

 private:
  Status truncate(int64_t n, bool pooling, size_t prefix, size_t suffix, std::vector<int32_t>& ids,
                  std::string* field) const;
  Status check_generation(GenerateRequest& request, int64_t prompt_len, std::string* field) const;
  Status resolve_bad_words(GenerateRequest& request, std::string* field) const;
  Status check_pooling(const GenerateRequest& request, int64_t prompt_len, std::string* field) const;

  InputProcessorSetup setup_;
  int64_t vocab_size_ = 0;
  std::mutex mu_;             // the id counter and setup_.seeds
  uint64_t next_request_ = 0;
  std::mutex processors_mu_;  // a processor is called from one thread at a time
};

}  // namespace troupe::engine
