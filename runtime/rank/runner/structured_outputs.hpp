// The driver's structured outputs: per request that asked for one (sampling
// params' structured_output: json_object, json_schema or choice), the JSON
// recognizer's state (or the output so far, for a choice), advanced by every
// token the request gets, and the logits masks that keep its output an object
// the schema admits (or one of the choices). The tokenizer's token texts are
// read on first use.
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
  /// Masks the request's rows: the first from its state, then one per draft token, each
  /// from the state after the drafts before it (rows after an impossible draft are left:
  /// verification rejects that draft first).
  void mask_rows(const std::string& request_id, float* first_row, int64_t vocab, std::span<const int32_t> drafts);
  /// The request got `token`.
  void advance(const std::string& request_id, int32_t token);

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
  void mask_choice(const State& state, const std::string& output, float* row) const;
  std::unique_ptr<structured::JsonTokenMasker> masker_;  // masks cached per (schema, state)
  std::unordered_map<std::string, State> states_;
  // Compiled schemas by text, so requests with the same schema share masks (bounded).
  std::unordered_map<std::string, std::shared_ptr<const structured::CompiledSchema>> schemas_;
};

}  // namespace troupe::engine
