#include "bench/structured/maskbench_walk.hpp"

#include <chrono>

#include "runtime/rank/structured/grammar_matcher.hpp"

namespace troupe::bench {

WalkResult walk_tokens(const std::shared_ptr<const structured::Grammar>& grammar,
                       const std::shared_ptr<const structured::TokenVocabulary>& vocab,
                       const std::vector<int32_t>& tokens) {
  using clock = std::chrono::steady_clock;
  WalkResult r;
  structured::GrammarMatcher m(grammar, vocab);
  std::vector<uint64_t> bits(vocab->mask_words());
  for (int32_t t : tokens) {
    auto t0 = clock::now();
    Status s = m.fill_mask(bits.data());
    bool allowed = s.ok() && ((bits[static_cast<uint32_t>(t) >> 6] >> (t & 63)) & 1);
    bool took = allowed && m.accept_token(t);
    r.mask_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
    if (!s.ok()) {
      r.error = s.to_string();
      return r;
    }
    if (allowed != took || (!allowed && m.accept_token(t))) {
      if (!allowed) m.rollback(1);
      r.mismatch = "token " + std::to_string(t) + ": mask " + (allowed ? "allows" : "refuses") + " it, accept_token " +
                   (allowed ? "refuses" : "takes") + " it";
      return r;
    }
    if (!allowed) return r;
    ++r.tokens_allowed;
  }
  Status s = m.fill_mask(bits.data());
  r.ended = m.can_end();
  if (s.ok()) {
    bool eog_in_mask = false;
    for (int32_t id : vocab->eog_ids()) {
      eog_in_mask = eog_in_mask || ((bits[static_cast<uint32_t>(id) >> 6] >> (id & 63)) & 1);
      bits[static_cast<uint32_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
    }
    bool others = false;
    for (uint64_t w : bits) others = others || w != 0;
    // End-of-generation is in the mask exactly when the grammar accepts, or when nothing
    // else could come (a vocabulary without the bytes needed).
    if (eog_in_mask != (r.ended || !others)) r.mismatch = "end-of-generation: mask and can_end disagree";
  }
  r.accepted = r.ended;
  return r;
}

}  // namespace troupe::bench
