// The engine's logits processors (troupe/logits_processor.hpp): the ones named
// in EngineConfig::model.logits_processors, made from the registry in that
// order, over the model's tokenizer. The driver rank's WorkerRunner applies
// them to each step's logits before sampling; the engine's process keeps its
// own chain to check each request's arguments when it is submitted.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/logits_processor.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// A request's extra_args as processors receive them: "{}" for none. Else
/// invalid_argument unless it is a JSON object (vLLM's `vllm_xargs`).
Result<std::string> normalize_extra_args(std::string_view extra_args);

class LogitsProcessorChain {
 public:
  /// Every processor of config.model.logits_processors (none: an empty chain).
  /// An unregistered name is not_found listing the registered ones.
  static Result<std::unique_ptr<LogitsProcessorChain>> create(const EngineConfig& config, int64_t vocab_size,
                                                               std::shared_ptr<const tokenizer::Tokenizer> tokenizer);
  ~LogitsProcessorChain();

  bool empty() const { return processors_.empty(); }
  const std::vector<std::string>& names() const { return names_; }

  /// Every processor's validate_request; the first error, prefixed with the processor's name.
  Status validate(std::string_view request_id, std::string_view extra_args, std::span<const int32_t> prompt) const;
  Status add_request(std::string_view request_id, std::string_view extra_args, std::span<const int32_t> prompt);
  void remove_request(std::string_view request_id);
  /// Every processor, in order, on rows [rows.size()][vocab_size] of `logits`.
  Status apply(float* logits, int64_t vocab_size, std::span<const LogitsRow> rows);

 private:
  class Tokenizer;
  LogitsProcessorChain() = default;

  std::unique_ptr<Tokenizer> tokenizer_;  // outlives the processors (declared first, destroyed last)
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<LogitsProcessor>> processors_;
};

}  // namespace troupe::engine
