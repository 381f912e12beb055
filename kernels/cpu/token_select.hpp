// Choosing one token from a row of logits, as Ops::select_tokens defines it
// (troupe/ops.hpp's TokenSelection): greedy argmax, or temperature, min_p,
// top_k and top_p over the probabilities sorted by value, then the first token
// whose running mass exceeds u times the kept total. It is the reference the
// conformance check holds device platforms to.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::kernels::cpu {

/// The chosen token of logits[0, vocab); temperature <= 0 (or so small that 1/T overflows) is greedy (lowest id on ties).
/// `probs` and `order` are scratch, resized as needed.
int32_t select_token(const float* logits, int64_t vocab, float temperature, float top_p, float min_p, int32_t top_k,
                     double u, std::vector<float>& probs, std::vector<int32_t>& order);

}  // namespace troupe::kernels::cpu
