#include "runtime/engine/in_process_executor.hpp"

namespace troupe::engine {

void InProcessExecutor::execute(StepInput input, Done done) {
  if (ranks_.empty()) return done(internal_error("the executor has no ranks"));
  // Ranks above the driver first, on copies; the driver takes the input itself.
  for (size_t r = 1; r < ranks_.size(); ++r) {
    auto out = ranks_[r]->execute(input);
    if (!out) return done(Status(out.status().code(), "rank " + std::to_string(r) + ": " + out.status().message()));
  }
  done(ranks_[0]->execute(std::move(input)));
}

}  // namespace troupe::engine
