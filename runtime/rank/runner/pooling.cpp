#include "runtime/rank/runner/pooling.hpp"

#include <cmath>

namespace troupe::engine {

Status pool(const float* hidden, int64_t num_tokens, int64_t hidden_size, const PoolingParams& params,
            const PoolingDefaults& defaults, std::vector<float>* out) {
  if (num_tokens <= 0 || hidden_size <= 0) return invalid_argument("nothing to pool");
  const PoolingType type = params.type.value_or(defaults.type);
  std::vector<double> acc(static_cast<size_t>(hidden_size), 0.0);
  auto add_row = [&](int64_t t) {
    const float* row = hidden + t * hidden_size;
    for (int64_t i = 0; i < hidden_size; ++i) acc[i] += row[i];
  };
  switch (type) {
    case PoolingType::mean:
      for (int64_t t = 0; t < num_tokens; ++t) add_row(t);
      for (auto& v : acc) v /= static_cast<double>(num_tokens);
      break;
    case PoolingType::cls: add_row(0); break;
    case PoolingType::last: add_row(num_tokens - 1); break;
  }
  int64_t dims = hidden_size;
  if (params.dimensions) {
    if (!defaults.matryoshka)
      return invalid_argument("this model does not support 'dimensions' (it is not a matryoshka model)");
    if (*params.dimensions < 1 || *params.dimensions > hidden_size)
      return invalid_argument("dimensions must be in 1.." + std::to_string(hidden_size) + ", got " +
                              std::to_string(*params.dimensions));
    dims = *params.dimensions;
  }
  acc.resize(static_cast<size_t>(dims));
  if (params.normalize.value_or(defaults.normalize)) {
    double norm = 0;
    for (double v : acc) norm += v * v;
    norm = std::sqrt(norm);
    if (norm > 0)
      for (auto& v : acc) v /= norm;
  }
  out->assign(acc.begin(), acc.end());
  return {};
}

}  // namespace troupe::engine
