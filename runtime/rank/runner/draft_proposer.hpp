// Speculative decoding's drafts on the driver rank: after a step is sampled, the
// n-gram drafter (runtime/rank/spec_decode/ngram_proposer.hpp) proposes the next
// step's drafts for each sampled request from its prompt and output, and hands
// them over through the SDK's DraftTokensExtension interface into the step's
// output; the scheduler sends them back to be verified by the next step.
#pragma once

#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/rank/runner/driver_requests.hpp"
#include "runtime/rank/spec_decode/ngram_proposer.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class DraftProposer {
 public:
  /// `config` must be enabled and valid (spec_decode::validate).
  explicit DraftProposer(const SpeculativeConfig& config) : drafter_(config) {}

  /// Drafts for each `sample_ids` request into out.draft_token_ids (one list each), cut so
  /// that its next step (the accepted drafts and one more token) stays within its
  /// max_tokens; a pooling request gets none.
  Status propose(const std::vector<std::string>& sample_ids, const DriverRequests& requests, StepOutput& out);

  int num_speculative_tokens() const { return drafter_.num_speculative_tokens(); }

 private:
  spec_decode::NgramDrafter drafter_;
};

}  // namespace troupe::engine
