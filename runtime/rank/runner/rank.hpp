// One rank of a model as the engine drives it: it runs each RankCommand
// (runtime/protocol/rank_command.hpp) on its WorkerRunner and answers with the
// command's reply. The worker actor is a mailbox around one Rank; the
// in-process executor calls Ranks directly.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/protocol/rank_command.hpp"
#include "runtime/rank/runner/worker_runner.hpp"
#include "troupe/platform.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class Rank {
 public:
  /// `platform` makes the worker of `rank` at LoadModel; it must outlive the Rank.
  Rank(const Platform& platform, int32_t rank) : platform_(&platform), rank_(rank) {}

  /// Run one command. Every command but LoadModel needs a loaded model.
  Result<RankReply> run(RankCommand command);

  /// The loaded rank, or null before LoadModel.
  WorkerRunner* runner() { return runner_.get(); }

 private:
  const Platform* platform_;
  int32_t rank_;
  std::unique_ptr<WorkerRunner> runner_;
};

}  // namespace troupe::engine
