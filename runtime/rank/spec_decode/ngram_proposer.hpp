// The n-gram (prompt lookup) drafter, as vLLM's NgramProposer: the last n tokens of
// a sequence (prompt + output), for the largest n in [min_n, max_n] that occurred
// earlier in it, and the up to k tokens that followed their first earlier occurrence
// are the draft. No model runs: it pays off on text that repeats its context
// (summaries, edits, code).
//
// It runs on the driver rank after sampling (where vLLM's model runner runs it) and
// hands the drafts over through the SDK's DraftTokensExtension interface: one list
// per sampled row of the last step, which travel back to the scheduler in the step's
// output and are verified by the next step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "troupe/extensions.hpp"

namespace troupe::spec_decode {

/// The draft for `tokens`: up to `k` tokens that followed the first earlier occurrence of
/// its longest suffix n-gram, min_n <= n <= max_n (longer n first). Empty when no suffix of
/// those lengths occurred before.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int k);

class NgramDrafter final : public DraftTokensExtension {
 public:
  explicit NgramDrafter(const SpeculativeConfig& config);

  /// Drafts for the rows of the step just sampled: the context of each (prompt + output),
  /// and the most tokens each may take (its remaining budget; 0: no draft).
  void propose(std::span<const std::span<const int32_t>> contexts, std::span<const int32_t> max_tokens);
  /// DraftTokensExtension: the drafts of the last propose(), one list per row; then none.
  Result<std::vector<std::vector<int32_t>>> take_draft_token_ids() override;

  int num_speculative_tokens() const { return k_; }

 private:
  int min_n_, max_n_, k_;
  std::vector<std::vector<int32_t>> drafts_;
};

}  // namespace troupe::spec_decode
