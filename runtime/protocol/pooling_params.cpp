#include "runtime/protocol/pooling_params.hpp"

#include <string>

namespace troupe::engine {

Result<PoolingType> parse_pooling_type(std::string_view name) {
  if (name == "mean" || name == "MEAN") return PoolingType::mean;
  if (name == "cls" || name == "CLS") return PoolingType::cls;
  if (name == "last" || name == "LAST") return PoolingType::last;
  return invalid_argument("unknown pooling type '" + std::string(name) + "' (mean, cls or last)");
}

const char* to_string(PoolingType type) {
  switch (type) {
    case PoolingType::mean: return "mean";
    case PoolingType::cls: return "cls";
    case PoolingType::last: return "last";
  }
  return "unknown";
}

}  // namespace troupe::engine
