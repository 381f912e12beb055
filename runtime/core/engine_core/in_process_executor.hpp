// An Executor over ranks that live in this process and are called directly:
// the offline generator's, and the tests'.
#pragma once

#include <memory>
#include <vector>

#include "runtime/core/engine_core/executor.hpp"
#include "runtime/rank/runner/rank.hpp"

namespace troupe::engine {

class InProcessExecutor final : public Executor {
 public:
  /// `world` ranks of `platform` (which must outlive the executor), no model loaded yet.
  explicit InProcessExecutor(const Platform& platform, int world = 1);
  /// Runs every rank in turn (ranks above the driver first, on copies of the
  /// command) and calls `done` before returning.
  void collective(RankCommand command, Done done) override;

  Rank& rank(size_t r) { return *ranks_[r]; }
  /// The driver's runner; null before LoadModel.
  WorkerRunner* driver() { return ranks_[0]->runner(); }

 private:
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace troupe::engine
