// Pooling: one vector per sequence from its tokens' hidden states (vLLM's
// Pooler): the mean over the tokens, the first ([CLS]) or the last token,
// then optional L2 normalization. Runs on the driver rank, next to the hidden
// states, as sampling runs next to the logits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/protocol/pooling_params.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// Pools rows [0, num_tokens) of `hidden` ([num_tokens][hidden_size], one
/// sequence's tokens in order) into `out` (hidden_size, or `dimensions`).
/// Sums in double so the mean does not depend on the sequence length's rounding.
Status pool(const float* hidden, int64_t num_tokens, int64_t hidden_size, const PoolingParams& params,
            const PoolingDefaults& defaults, std::vector<float>* out);

}  // namespace troupe::engine
