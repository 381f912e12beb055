#include "troupe/status.hpp"

namespace troupe {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::not_found: return "not_found";
    case StatusCode::not_supported: return "not_supported";
    case StatusCode::out_of_range: return "out_of_range";
    case StatusCode::data_loss: return "data_loss";
    case StatusCode::resource_exhausted: return "resource_exhausted";
    case StatusCode::unavailable: return "unavailable";
    case StatusCode::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(troupe::to_string(code_)) + ": " + message_;
}

}  // namespace troupe
