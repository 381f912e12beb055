// What a pooling request asks for and a model's pooling defaults (vLLM's
// PoolingParams and pooler config): plain data the engine protocol carries.
// The pooling itself runs on the driver rank (runtime/rank/runner/pooling).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

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

}  // namespace troupe::engine
