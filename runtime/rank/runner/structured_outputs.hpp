// The driver's structured outputs on the grammar engine (runtime/rank/structured/):
// per request that asked for one (sampling params' structured_output: json_object,
// json_schema, regex, grammar, structural_tag or choice) a GrammarMatcher, advanced
// by every token the request gets, and each step's token masks.
//
// A step's masks depend only on the states the previous steps left, never on this
// step's logits: begin_masks() hands them to a worker thread this object owns, the
// model runs meanwhile, end_masks() waits for them, and TokenMasks::apply() writes
// them into the logits. A request whose grammar cannot be compiled here, or whose
// mask goes over its limit (work per mask, the lexer's memory), fails alone:
// take_failures() names it and its error for the core; its rows are left unmasked.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/grammar_matcher.hpp"
#include "runtime/rank/structured/token_vocabulary.hpp"
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
  /// Row `row` becomes masked; its bits ([id / 64] bit id % 64, words() words), all clear,
  /// for the caller to set. Valid until the next row() or reset().
  uint64_t* row(size_t row);
  /// Row `row` is not masked after all.
  void unmask(size_t row) { masked_[row] = 0; }
  size_t rows() const { return masked_.size(); }
  size_t words() const { return words_; }
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
  /// vocab_size: the width of a logits row. Grammars compile under `limits`
  /// (--structured-outputs-compile-timeout-s, --structured-outputs-max-memory-mib), through
  /// the process's GrammarCache::shared().
  StructuredOutputs(TokenizerLoader load, int64_t vocab_size, structured::GrammarLimits limits = {});
  ~StructuredOutputs();
  StructuredOutputs(const StructuredOutputs&) = delete;
  StructuredOutputs& operator=(const StructuredOutputs&) = delete;

  /// A new (or preempted and resumed) request: its matcher, advanced by the tokens it
  /// already has. Nothing for a request without a structured output. A grammar that does
  /// not compile fails this request alone (take_failures()).
  void add(const SamplingState& request);
  void remove(const std::string& request_id) { states_.erase(request_id); }
  bool has(const std::string& request_id) const { return states_.count(request_id) != 0; }

  /// Starts this step's masks for the sampled requests `sample_ids`, which verify
  /// drafts[i] each (drafts empty: none), on the worker thread: a request with a structured
  /// output gets its first row's mask from its state, then one per draft, each from the
  /// state after the drafts before it (rows after an impossible draft are left: verification
  /// rejects that draft first); other requests' rows are left. Reads no logits. Until
  /// end_masks() nothing else may be called, and `masks` is the worker's.
  void begin_masks(const std::vector<std::string>& sample_ids, const std::vector<std::vector<int32_t>>& drafts,
                   TokenMasks& masks);
  /// Waits for the masks begin_masks() started (nothing when none was started).
  void end_masks();
  /// begin_masks() then end_masks().
  void compute_masks(const std::vector<std::string>& sample_ids, const std::vector<std::vector<int32_t>>& drafts,
                     TokenMasks& masks) {
    begin_masks(sample_ids, drafts, masks);
    end_masks();
  }
  /// The requests that failed since the last call, with their errors (each named once).
  std::vector<RequestFailure> take_failures();

  /// The request got `token`.
  void advance(const std::string& request_id, int32_t token);
  /// Every request of `sample_ids` got its tokens of `out` (1 + out.num_accepted[i] each,
  /// in order; one each without drafts).
  void advance(const std::vector<std::string>& sample_ids, const StepOutput& out);
  /// Bytes the live requests' distinct grammars hold now (their lazily built lexers included).
  size_t grammar_bytes() const;

 private:
  struct State {
    std::shared_ptr<const structured::Grammar> grammar;  // outlives the matcher
    std::unique_ptr<structured::GrammarMatcher> matcher;
    bool failed = false;  // reported; its rows are left unmasked until the core ends it
  };
  Status load_vocabulary();
  void fail(const std::string& request_id, State* state, Status error);
  /// The rows of one request, from `first` on.
  void mask_request(const std::string& request_id, State& state, std::span<const int32_t> drafts, size_t first,
                    TokenMasks& masks);
  void run_masks();
  void worker_loop();

  TokenizerLoader load_;
  int64_t vocab_size_;
  structured::GrammarLimits limits_;
  std::shared_ptr<const structured::TokenVocabulary> vocab_;
  std::unordered_map<std::string, State> states_;
  std::vector<RequestFailure> failures_;

  // The step handed to the worker thread.
  std::vector<std::string> job_ids_;
  std::vector<std::vector<int32_t>> job_drafts_;
  TokenMasks* job_masks_ = nullptr;
  // The worker thread (started on first use) and its hand-over.
  std::mutex mutex_;
  std::condition_variable cv_;
  bool job_pending_ = false;  // handed over, not finished
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace troupe::engine
