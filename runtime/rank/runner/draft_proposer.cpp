#include "runtime/rank/runner/draft_proposer.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

#include "troupe/extensions.hpp"

namespace troupe::engine {

Status DraftProposer::propose(const std::vector<std::string>& sample_ids, const DriverRequests& requests,
                              StepOutput& out) {
  const size_t entries = sample_ids.size();
  std::vector<std::vector<int32_t>> contexts(entries);
  std::vector<std::span<const int32_t>> views(entries);
  std::vector<int32_t> budgets(entries, 0);
  for (size_t i = 0; i < entries; ++i) {
    const SamplingState* req = requests.find(sample_ids[i]);
    if (!req) return internal_error("no sampling state for request " + sample_ids[i]);
    contexts[i].reserve(req->prompt_token_ids.size() + req->output_token_ids.size());
    contexts[i].assign(req->prompt_token_ids.begin(), req->prompt_token_ids.end());
    contexts[i].insert(contexts[i].end(), req->output_token_ids.begin(), req->output_token_ids.end());
    views[i] = contexts[i];
    // The next step emits its drafts' accepted prefix and one more token: stay within max_tokens.
    const int64_t left = int64_t{req->params.max_tokens} - static_cast<int64_t>(req->output_token_ids.size()) - 1;
    budgets[i] = req->pooling ? 0 : static_cast<int32_t>(std::clamp<int64_t>(left, 0, num_speculative_tokens()));
  }
  drafter_.propose(views, budgets);
  DraftTokensExtension& drafts = drafter_;
  auto taken = drafts.take_draft_token_ids();
  if (!taken) return taken.status();
  out.draft_token_ids = std::move(taken).value();
  return {};
}

}  // namespace troupe::engine
