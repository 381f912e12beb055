// An Executor over ranks that live in this process and are called directly:
// the offline generator's, and the tests'.
#pragma once

#include <vector>

#include "runtime/engine/engine_core.hpp"
#include "runtime/engine/worker_runner.hpp"

namespace troupe::engine {

class InProcessExecutor final : public Executor {
 public:
  /// `ranks` in rank order (rank 0 is the driver); they must outlive the executor.
  explicit InProcessExecutor(std::vector<WorkerRunner*> ranks) : ranks_(std::move(ranks)) {}
  /// Runs every rank in turn and calls `done` before returning.
  void execute(StepInput input, Done done) override;

 private:
  std::vector<WorkerRunner*> ranks_;
};

}  // namespace troupe::engine
