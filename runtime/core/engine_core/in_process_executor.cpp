#include "runtime/core/engine_core/in_process_executor.hpp"

namespace troupe::engine {

InProcessExecutor::InProcessExecutor(const Platform& platform, int world) {
  for (int r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(platform, r));
}

void InProcessExecutor::collective(RankCommand command, Done done) {
  if (ranks_.empty()) return done(internal_error("the executor has no ranks"));
  Replies replies(ranks_.size());
  for (size_t r = 1; r < ranks_.size(); ++r) {
    auto reply = ranks_[r]->run(command);
    if (!reply)
      return done(Status(reply.status().code(), "rank " + std::to_string(r) + ": " + reply.status().message()));
    replies[r] = std::move(reply).value();
  }
  auto driver = ranks_[0]->run(std::move(command));
  if (!driver) return done(driver.status());
  replies[0] = std::move(driver).value();
  done(std::move(replies));
}

}  // namespace troupe::engine
