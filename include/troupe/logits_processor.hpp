// LogitsProcessor: a batch-level hook on every step's logits before sampling
// (vLLM v1's logits processors). A general plugin registers a factory by name;
// the engine enables processors by name (the setting "model.logits_processors",
// `--logits-processors a,b`) and runs them, in that order, on the rank that
// samples. Per-request arguments come from the request (the OpenAI body's
// `vllm_xargs` object, SamplingParams::extra_args) as JSON text; a processor
// acts on the requests whose arguments it understands and leaves the other rows
// untouched.
//
// Life of a processor: made once per engine on the sampling rank (and once in
// the engine's process, where only validate_request is called); add_request
// when a request joins the batch (again after a preemption: replace its
// state), apply once per step with the rows that sample in it, remove_request
// when it has finished or was aborted. All calls come from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/config_view.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// The model's tokenizer, as a processor may use it (valid as long as the processor).
class TokenizerView {
 public:
  virtual ~TokenizerView() = default;
  /// Token ids are [0, vocab_size()).
  virtual int32_t vocab_size() const = 0;
  /// The ids of `text` as it would be tokenized inside a longer text: no BOS or
  /// other added special tokens.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  /// The bytes token `id` adds to a request's output text: the output is the
  /// concatenation of these over its tokens (modulo a leading space that some
  /// tokenizers drop at the very start); "" for special tokens, which the output hides.
  virtual std::string token_text(int32_t id) const = 0;
};

struct LogitsProcessorContext {
  const ConfigView* config = nullptr;
  int64_t vocab_size = 0;                    // width of a logits row (the model's vocabulary)
  const TokenizerView* tokenizer = nullptr;  // outlives the processor
};

/// A request as a processor meets it.
struct LogitsRequest {
  std::string_view request_id;
  /// The request's arguments (vLLM's `vllm_xargs`): a JSON object as text, "{}" when none.
  std::string_view args_json;
  std::span<const int32_t> prompt_token_ids;
};

/// One logits row of a step: the request that samples from it.
struct LogitsRow {
  std::string_view request_id;
  std::span<const int32_t> output_token_ids;  // sampled before this step
};

/// One step's logits: row i, [vocab_size] floats at logits + i * vocab_size, belongs to rows[i].
struct LogitsBatch {
  int64_t vocab_size = 0;
  float* logits = nullptr;
  std::span<const LogitsRow> rows;
  float* row(size_t i) const { return logits + static_cast<int64_t>(i) * vocab_size; }
};

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  /// Checks a request's arguments when it is submitted, before it is queued.
  /// An error refuses the request with its message (HTTP 400 for invalid_argument).
  virtual Status validate_request(const LogitsRequest& request) const;
  /// A request joined the batch (new, or again after a preemption: replace its state).
  virtual Status add_request(const LogitsRequest& request) = 0;
  /// A request finished or was aborted.
  virtual void remove_request(std::string_view request_id) = 0;
  /// Change the rows in place (-infinity bans a token). An error fails the step.
  virtual Status apply(const LogitsBatch& batch) = 0;
};

using LogitsProcessorFactory = Result<std::unique_ptr<LogitsProcessor>> (*)(const LogitsProcessorContext& context);

namespace logits_processor_registry {
/// Register `factory` as `name`; the same factory again is a no-op, another one
/// replaces it with a warning.
void register_processor(std::string_view name, LogitsProcessorFactory factory);
/// Sorted names of every registered processor.
std::vector<std::string> registered_processors();
bool is_registered(std::string_view name);
/// A new processor named `name`; not_found lists the registered ones.
Result<std::unique_ptr<LogitsProcessor>> create(std::string_view name, const LogitsProcessorContext& context);
}  // namespace logits_processor_registry

}  // namespace troupe
