// The driver's structured outputs: per request that asked for one (sampling
// params' structured_output: json_object, json_schema or choice), the JSON
// recognizer's state (or the output so far, for a choice), advanced by every
// token the request gets, and the logits masks that keep its output an object
// the schema admits (or one of the choices). The tokenizer's token texts are
// read on first use.
//
// A step's masks depend only on the states the previous steps left, never on
// this step's logits: compute_masks() may run while the model computes them,
// and TokenMasks::apply() writes them into the logits afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/rank/structured/json_matcher.hpp"
#include "runtime/rank/structured/json_token_masker.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// One step's structured-output masks, one per logits row in the step's order (each
/// sampled request's first row, then one per draft): the tokens the row may take, or no
/// mask. Reused from step to step.
class TokenMasks {
 public:
  /// `rows` rows of `vocab_size` tokens, none masked.
  void reset(size_t rows, int64_t vocab_size);
  /// Row `row` may take only the tokens set in `allowed` ([id / 64] bit id % 64).
  void set(size_t row, const std::vector<uint64_t>& allowed);
  size_t rows() const { return masked_.size(); }
  bool masked(size_t row) const { return masked_[row] != 0; }
  /// Sets every disallowed entry of the masked rows of `logits` ([rows][vocab_size]) to
  /// -infinity; nothing when `vocab_size` is not the width the masks were made for.
  void apply(float* logits, int64_t vocab_size, size_t rows) const;

 private:
  int64_t vocab_size_ = 0;
  size_t words_ = 0;               // per row
  std::vector<uint8_t> masked_;    // [rows]
  std::vector<uint64_t> allowed_;  // [rows][words_]
};

class StructuredOutputs {
 public:
  using TokenizerLoader = std::function<Result<std::shared_ptr<const tokenizer::Tokenizer>>()>;
  /// vocab_size: the width of a logits row.
  StructuredOutputs(TokenizerLoader load, int64_t vocab_size);
  ~StructuredOutputs();

  /// A new (or preempted and resumed) request: its state from the tokens it already has.
  /// Nothing for a request without a structured output.
  Status add(const SamplingState& request);
  void remove(const std::string& request_id) { states_.erase(request_id); }
  bool has(const std::string& request_id) const { return states_.count(request_id) != 0; }
  /// This step's masks for the sampled requests `sample_ids`, which verify drafts[i] each
  /// (drafts empty: none). A request with a structured output gets its first row's mask
  /// from its state, then one per draft, each from the state after the drafts before it
  /// (rows after an impossible draft are left: verification rejects that draft first);
  /// other requests' rows are left. Reads no logits: it may run while the model runs.
  void compute_masks(const std::vector<std::string>& sample_ids, const std::vector<std::vector<int32_t>>& drafts,
                     TokenMasks& masks);
  /// The request got `token`.
  void advance(const std::string& request_id, int32_t token);
  /// Every request of `sample_ids` got its tokens of `out` (1 + out.num_accepted[i] each,
  /// in order; one each without drafts).
  void advance(const std::vector<std::string>& sample_ids, const StepOutput& out);

 private:
  const std::string& text(int32_t token) const;

  TokenizerLoader load_;
  int64_t vocab_size_;
  std::vector<std::string> texts_;  // per token id, the bytes it adds to the output
  struct State {
    std::shared_ptr<const structured::CompiledSchema> schema;  // outlives the matcher
    structured::JsonMatcher matcher;
    // A choice instead (schema null): the choices, and the output so far while it is a
    // prefix of one ("" once it left them all, which masks then never let happen).
    std::vector<std::string> choices;
    std::string output;
  };
  std::vector<uint64_t> allowed_choices(const State& state, const std::string& output) const;
  /// The rows of one request, from `first` on.
  void mask_request(const State& state, std::span<const int32_t> drafts, size_t first, TokenMasks& masks);
  std::unique_ptr<structured::JsonTokenMasker> masker_;  // masks cached per (schema, state)
  std::unordered_map<std::string, State> states_;
  // Compiled schemas by text, so requests with the same schema share masks (bounded).
  std::unordered_map<std::string, std::shared_ptr<const structured::CompiledSchema>> schemas_;
};

}  // namespace troupe::engine
