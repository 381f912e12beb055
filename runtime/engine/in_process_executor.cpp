#include "runtime/engine/in_process_executor.hpp"

#include <algorithm>

namespace troupe::engine {

void InProcessExecutor::execute(StepInput input, Done done) {
  if (ranks_.empty()) return done(internal_error("the executor has no ranks"));
  // Ranks above the driver first, on copies; the driver takes the input itself.
  int64_t bytes = 0;
  double seconds = 0;
  for (size_t r = 1; r < ranks_.size(); ++r) {
    auto out = ranks_[r]->execute(input);
    if (!out) return done(Status(out.status().code(), "rank " + std::to_string(r) + ": " + out.status().message()));
    bytes += out->communicator_bytes;
    seconds = std::max(seconds, out->communicator_seconds);
  }
  auto driver = ranks_[0]->execute(std::move(input));
  if (driver) {
    driver->communicator_bytes += bytes;
    driver->communicator_seconds = std::max(driver->communicator_seconds, seconds);
  }
  done(std::move(driver));
}

}  // namespace troupe::engine
