// The driver rank's choice of each sampled request's tokens in a step: on the
// device when every row of a plain step allows it (sampling::device_selection,
// the platform's named op select_tokens), else on the host from the logits
// (sampling::sample), verifying the step's drafts where there are any
// (sampling::verify_drafts, vLLM's rejection sampler). What changes the logits
// before (logits processors, structured-output masks) is the caller's; the
// tokens chosen are appended to each request's state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/rank/runner/driver_requests.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"
#include "troupe/worker.hpp"

namespace troupe::engine {

class StepSampler {
 public:
  /// `rank` names this rank in errors.
  explicit StepSampler(int32_t rank) : rank_(rank) {}

  /// The device's plan for a step whose batch asks for `logits_rows` rows: one TokenSelection
  /// per sampled request when the step is plain (one row per request, no drafts) and every
  /// request's token can be chosen on the device; else `plan` is left empty.
  void plan_device_selection(const StepInput& input, size_t logits_rows, const DriverRequests& requests,
                             std::vector<TokenSelection>& plan) const;
  /// The tokens the worker chose on the device (result.sampled_token_ids, one per request,
  /// as `plan` asked) into out.tokens.
  Status take_device_tokens(const StepInput& input, const ModelRunnerOutput& result,
                            const std::vector<TokenSelection>& plan, DriverRequests& requests, StepOutput& out) const;
  /// The step's number of logits rows (1 + drafts per sampled request); internal_error when
  /// the drafts or result.logits do not match it.
  Result<size_t> logits_rows(const StepInput& input, const ModelRunnerOutput& result) const;
  /// Each sampled request's tokens from its rows of `logits` ([rows][vocab], processed and
  /// masked): one token, or the accepted drafts and one more (out.num_accepted). Logprobs
  /// come from `raw_logits` (the same rows before processors and masks) when it is given.
  Status sample(const StepInput& input, const float* logits, const float* raw_logits, int64_t vocab,
                DriverRequests& requests, StepOutput& out) const;

 private:
  int32_t rank_;
};

}  // namespace troupe::engine
