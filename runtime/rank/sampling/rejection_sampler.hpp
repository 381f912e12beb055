// Verifying draft tokens (speculative decoding) against the target model's logits,
// one request at a time, as vLLM's RejectionSampler with a drafter that has no
// probabilities of its own (n-gram: each draft is proposed with probability 1).
//
// Rows 0..d of `logits` are the target's logits after the request's last known token
// and after each of its d drafts. Position j compares draft j with row j:
// - greedy: the draft is accepted while it equals what sample() picks (the argmax after
//   penalties); the first mismatch emits the target's token instead and ends the step.
//   The output is token for token what decoding without drafts gives.
// - random: draft x is accepted with probability p(x), p the distribution sample()
//   draws from (penalties, temperature, min_p, top_k, top_p); on rejection a token is
//   drawn from p with x removed and renormalised. Each emitted token is thus distributed
//   as p (Leviathan et al. 2023, with q the point mass on x).
// When every draft is accepted, row d gives one more token (the bonus token), so a step
// emits between 1 and d + 1 tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/rank/sampling/sampler.hpp"
#include "runtime/protocol/sampling_params.hpp"

namespace troupe::sampling {

struct VerifiedTokens {
  std::vector<SampleResult> tokens;  // 1 + num_accepted tokens, in order
  int32_t num_accepted = 0;          // drafts accepted (a prefix of the drafts)
};

/// Verifies `drafts` with (drafts.size() + 1) rows of `logits` ([rows][vocab]). `output_ids`
/// is what the request generated before this step; every draw is seeded by
/// derive_step_seed(request_seed, tokens generated before it), so a request's tokens do
/// not depend on how it is batched.
VerifiedTokens verify_drafts(const float* logits, int64_t vocab, const SamplingParams& params,
                             std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                             std::span<const int32_t> drafts, uint64_t request_seed);

}  // namespace troupe::sampling
