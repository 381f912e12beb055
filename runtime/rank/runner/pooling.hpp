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

#include "troupe/status.hpp"

namespace troupe::engine {

enum class PoolingType { mean, cls, last };

/// "mean", "cls", "last"; anything else is invalid_argument.
Result<PoolingType> parse_pooling_type(std::string_view name);
const char* to_string(PoolingType type);

/// What a pooling request asks for; unset fields take the model's defaults.
struct PoolingParams {
  std::optional<PoolingType> type;
  std::optional<bool> normalize;
  std::optional<int32_t> dimensions;   // keep the first N dimensions (matryoshka models only)
};

/// The model's defaults (from its pooling config, e.g. sentence-transformers').
struct PoolingDefaults {
  PoolingType type = PoolingType::last;
  bool normalize = false;
  bool matryoshka = false;             // whether `dimensions` may truncate
};

/// Pools rows [0, num_tokens) of `hidden` ([num_tokens][hidden_size], one
/// sequence's tokens in order) into `out` (hidden_size, or `dimensions`).
/// Sums in double so the mean does not depend on the sequence length's rounding.
Status pool(const float* hidden, int64_t num_tokens, int64_t hidden_size, const PoolingParams& params,
            const PoolingDefaults& defaults, std::vector<float>* out);

}  // namespace troupe::engine
