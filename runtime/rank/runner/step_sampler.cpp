#include "runtime/rank/runner/step_sampler.hpp"

#include <span>
#include <string>
#include <utility>

#include "runtime/rank/sampling/rejection_sampler.hpp"
#include "runtime/rank/sampling/sampler.hpp"

namespace troupe::engine {
namespace {

SampledToken to_sampled_token(sampling::SampleResult s) {
  SampledToken tok;
  tok.token = s.token;
  tok.logprob = s.logprob;
  for (auto& [id, lp] : s.top_logprobs) {
    tok.top_ids.push_back(id);
    tok.top_logprobs.push_back(lp);
  }
  return tok;
}

}  // namespace

void StepSampler::plan_device_selection(const StepInput& input, size_t logits_rows, const DriverRequests& requests,
                                        std::vector<TokenSelection>& plan) const {
  plan.clear();
  // Only a plain step qualifies: one row per request.
  if (!input.draft_token_ids.empty() || input.sample_ids.size() != logits_rows) return;
  plan.reserve(input.sample_ids.size());
  for (const auto& id : input.sample_ids) {
    const SamplingState* req = requests.find(id);
    if (!req || req->pooling) return plan.clear();
    auto row = sampling::device_selection(req->params, req->output_token_ids.size(),
                                          sampling::derive_step_seed(req->seed, req->output_token_ids.size()));
    if (!row) return plan.clear();  // one row needs the logits: they all come out
    plan.push_back(*row);
  }
}

Status StepSampler::take_device_tokens(const StepInput& input, const ModelRunnerOutput& result,
                                       const std::vector<TokenSelection>& plan, DriverRequests& requests,
                                       StepOutput& out) const {
  const auto& ids = result.sampled_token_ids;
  if (plan.empty() || ids.size() != input.sample_ids.size())
    return internal_error("rank " + std::to_string(rank_) + " chose " + std::to_string(ids.size()) +
                          " tokens on the device for " + std::to_string(input.sample_ids.size()) + " sampled requests");
  out.tokens.clear();
  out.tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    SamplingState* req = requests.find(input.sample_ids[i]);
    if (!req) return internal_error("no sampling state for request " + input.sample_ids[i]);
    if (ids[i] < 0 || ids[i] >= result.vocab_size)
      return internal_error("the device chose token " + std::to_string(ids[i]) + " outside the vocabulary of " +
                            std::to_string(result.vocab_size));
    req->output_token_ids.push_back(ids[i]);
    SampledToken tok;
    tok.token = ids[i];
    out.tokens.push_back(std::move(tok));
  }
  return {};
}

Result<size_t> StepSampler::logits_rows(const StepInput& input, const ModelRunnerOutput& result) const {
  const size_t entries = input.sample_ids.size();
  const bool with_drafts = !input.draft_token_ids.empty();
  if (with_drafts && input.draft_token_ids.size() != entries)
    return internal_error("step " + std::to_string(input.step) + ": " + std::to_string(input.draft_token_ids.size()) +
                          " draft lists for " + std::to_string(entries) + " sampled requests");
  size_t rows = 0;
  for (size_t i = 0; i < entries; ++i) rows += 1 + (with_drafts ? input.draft_token_ids[i].size() : 0);
  const int64_t vocab = result.vocab_size;
  if (vocab <= 0 || static_cast<int64_t>(result.logits.size()) != vocab * static_cast<int64_t>(rows))
    return internal_error("rank " + std::to_string(rank_) + " returned " + std::to_string(result.logits.size()) +
                          " logits for " + std::to_string(rows) + " rows of vocabulary " + std::to_string(vocab));
  return rows;
}

Status StepSampler::sample(const StepInput& input, const float* logits, const float* raw_logits, int64_t vocab,
                           DriverRequests& requests, StepOutput& out) const {
  const size_t entries = input.sample_ids.size();
  const bool with_drafts = !input.draft_token_ids.empty();
  out.tokens.clear();
  out.tokens.reserve(entries);
  if (with_drafts) out.num_accepted.assign(entries, 0);
  size_t row = 0;
  for (size_t i = 0; i < entries; ++i) {
    SamplingState* found = requests.find(input.sample_ids[i]);
    if (!found) return internal_error("no sampling state for request " + input.sample_ids[i]);
    SamplingState& req = *found;
    const float* first_row = logits + static_cast<int64_t>(row) * vocab;
    const float* raw_row = raw_logits ? raw_logits + static_cast<int64_t>(row) * vocab : nullptr;
    const auto drafts = with_drafts ? std::span<const int32_t>(input.draft_token_ids[i]) : std::span<const int32_t>();
    row += 1 + drafts.size();
    int64_t emitted = 0;  // the row of this request's next token
    auto emit = [&](sampling::SampleResult s) {
      if (raw_row && req.params.logprobs >= 0)
        sampling::add_logprobs(s, raw_row + emitted * vocab, vocab, req.params.logprobs);
      ++emitted;
      req.output_token_ids.push_back(s.token);
      out.tokens.push_back(to_sampled_token(std::move(s)));
    };
    if (drafts.empty()) {
      uint64_t step_seed = sampling::derive_step_seed(req.seed, req.output_token_ids.size());
      emit(sampling::sample(first_row, vocab, req.params, req.prompt_token_ids, req.output_token_ids, step_seed));
      continue;
    }
    auto verified = sampling::verify_drafts(first_row, vocab, req.params, req.prompt_token_ids, req.output_token_ids,
                                            drafts, req.seed);
    out.num_accepted[i] = verified.num_accepted;
    for (auto& s : verified.tokens) emit(std::move(s));
  }
  return {};
}

}  // namespace troupe::engine
