#include "runtime/rank/sampling/rejection_sampler.hpp"

#include <utility>

#include "troupe/check.hpp"

namespace troupe::sampling {
namespace {
// Streams of one position's seed, apart from the one sample() uses.
constexpr uint64_t kAcceptStream = 0x5bd1e995a3c64f2bULL;
constexpr uint64_t kRecoverStream = 0x2545f4914f6cdd1dULL;
}  // namespace

VerifiedTokens verify_drafts(const float* logits, int64_t vocab, const SamplingParams& params,
                             std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                             std::span<const int32_t> drafts, uint64_t request_seed) {
  TROUPE_CHECK(vocab > 0 && logits != nullptr, "verify_drafts() needs logits");
  VerifiedTokens out;
  std::vector<int32_t> history(output_ids.begin(), output_ids.end());
  std::vector<float> probs;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const float* row = logits + static_cast<int64_t>(j) * vocab;
    const uint64_t seed = derive_step_seed(request_seed, history.size());
    const bool bonus = j == drafts.size();
    const int32_t draft = bonus ? -1 : drafts[j];
    SampleResult r;
    if (bonus || params.greedy() || draft < 0 || draft >= vocab) {
      // The bonus token, a greedy position, or a draft outside the vocabulary (always
      // rejected; drawing from p keeps the distribution): sample() as without drafts.
      r = sample(row, vocab, params, prompt_ids, history, seed);
    } else {
      target_probs(row, vocab, params, prompt_ids, history, probs);
      const double p_draft = probs[static_cast<size_t>(draft)];
      if (uniform01(seed ^ kAcceptStream) < p_draft) {
        r.token = draft;
      } else {
        // Recover: p without the draft, renormalised.
        const double rest = 1.0 - p_draft;
        double u = uniform01(seed ^ kRecoverStream) * rest;
        int32_t token = -1;
        for (int64_t t = 0; t < vocab; ++t) {
          if (t == draft || probs[static_cast<size_t>(t)] <= 0.0f) continue;
          token = static_cast<int32_t>(t);  // the last candidate absorbs rounding
          u -= probs[static_cast<size_t>(t)];
          if (u < 0) break;
        }
        r.token = token >= 0 ? token : draft;  // p was the point mass on the draft: nothing else can come
      }
      add_logprobs(r, row, vocab, params.logprobs);
    }
    out.tokens.push_back(std::move(r));
    const int32_t token = out.tokens.back().token;
    if (bonus || token != draft) break;
    ++out.num_accepted;
    history.push_back(token);
  }
  return out;
}

}  // namespace troupe::sampling
