// Turning one row of logits into a token: allowed_token_ids, bad_words, logit_bias,
// min_tokens, penalties (as vLLM), temperature, min_p, top_k, top_p, then a draw
// from a per-step RNG. Greedy at temperature 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "runtime/protocol/sampling_params.hpp"
#include "troupe/ops.hpp"

namespace troupe::sampling {

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;  // log-probability of `token` under the raw model distribution (when params.logprobs >= 0)
  std::vector<std::pair<int32_t, float>> top_logprobs;  // params.logprobs best (token, logprob), best first
};

/// vLLM's bad_words on one row: for each token sequence, its last token gets -inf when
/// `output_ids` ends with the sequence's other tokens (a one-token sequence: always).
void apply_bad_words(float* logits, int64_t vocab, std::span<const std::vector<int32_t>> bad_words_token_ids,
                     std::span<const int32_t> output_ids);

/// The seed of one step: a hash of the request seed and the number of tokens generated so far,
/// so the same request samples the same tokens however it is batched.
uint64_t derive_step_seed(uint64_t request_seed, uint64_t num_output_tokens);

/// Sample one token. `params` must be valid (validate()). Ties in greedy mode go to the lowest id.
SampleResult sample(const float* logits, int64_t vocab, const SamplingParams& params,
                    std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                    uint64_t seed_for_this_step);

/// Fills r.logprob (of r.token) and r.top_logprobs (the `num_logprobs` best) from the raw
/// logits row; nothing when num_logprobs < 0 (not asked for).
void add_logprobs(SampleResult& r, const float* logits, int64_t vocab, int32_t num_logprobs);

/// The distribution sample() draws from for random (non-greedy) params: penalties,
/// temperature, min_p, top_k and top_p applied, normalised; `probs` gets `vocab` entries.
void target_probs(const float* logits, int64_t vocab, const SamplingParams& params,
                  std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids, std::vector<float>& probs);

/// A uniform draw in [0, 1) from a seed (53 bits).
double uniform01(uint64_t seed);

/// The device's version of sample() for one row (Ops::select_tokens), or nothing when the
/// row needs the host: penalties, logprobs, logit_bias, allowed_token_ids, bad_words, a structured
/// output, or min_tokens not
/// reached after `num_output_tokens`. The draw u is the one sample() makes from the same step
/// seed, so greedy rows and rows with top_p < 1 get the host's token.
std::optional<TokenSelection> device_selection(const SamplingParams& params, size_t num_output_tokens,
                                               uint64_t seed_for_this_step);

}  // namespace troupe::sampling
