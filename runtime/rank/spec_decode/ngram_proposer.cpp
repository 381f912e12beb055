#include "runtime/rank/spec_decode/ngram_proposer.hpp"

#include <algorithm>
#include <utility>

#include "troupe/check.hpp"

namespace troupe::spec_decode {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int k) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || min_n < 1 || max_n < min_n) return {};
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Earlier occurrences start at i with i + n < len: at least one token follows them.
    for (int64_t i = 0; i + n < len; ++i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      const int64_t to = std::min<int64_t>(len, from + k);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

NgramDrafter::NgramDrafter(const SpeculativeConfig& config)
    : min_n_(config.prompt_lookup_min), max_n_(config.prompt_lookup_max), k_(config.num_speculative_tokens) {
  TROUPE_CHECK(config.enabled() && min_n_ >= 1 && max_n_ >= min_n_, "NgramDrafter needs a validated config");
}

void NgramDrafter::propose(std::span<const std::span<const int32_t>> contexts, std::span<const int32_t> max_tokens) {
  TROUPE_CHECK(contexts.size() == max_tokens.size(), "one token budget per context");
  drafts_.assign(contexts.size(), {});
  for (size_t i = 0; i < contexts.size(); ++i) {
    const int k = std::min(k_, max_tokens[i]);
    if (k > 0) drafts_[i] = propose_ngram(contexts[i], min_n_, max_n_, k);
  }
}

Result<std::vector<std::vector<int32_t>>> NgramDrafter::take_draft_token_ids() { return std::exchange(drafts_, {}); }

}  // namespace troupe::spec_decode
