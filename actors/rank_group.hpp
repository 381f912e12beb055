// The ranks of one model as the actors reach them: one worker actor per rank,
// and the one fan-out every all-ranks command takes (engine::Executor's
// collective). One request per rank, each with the group's time-out; the
// replies come back in rank order, or the first failure does, naming the rank
// ("loading the model on the worker of rank 1 (node 10.0.0.2:7000): ...";
// "the worker of rank 1 did not answer the step within 300 ms").
// Two executors share it: one for handlers of event-based actors (the
// scheduler: replies arrive as messages) and one that waits (start-up and the
// node supervisor's rebuild).
#pragma once

#include <caf/fwd.hpp>
#include <caf/error.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "runtime/core/engine_core/executor.hpp"

namespace troupe::actors {

struct RankGroup {
  std::vector<worker_actor> workers;      // rank order; rank 0 is the driver
  std::vector<std::string> places;        // "node 10.0.0.2:7000" per rank; empty: this process
  std::chrono::milliseconds timeout{0};   // each rank's answer to each command

  /// "the worker of rank 1 (node 10.0.0.2:7000)".
  std::string name(size_t rank) const;
};

/// One collective call in progress: every rank's reply, or the first failure.
/// The executors feed it each rank's answer; `done` runs exactly once.
class CollectiveRound {
 public:
  CollectiveRound(const RankGroup& group, const char* what, engine::Executor::Done done);
  void on_reply(size_t rank, engine::RankReply reply);
  void on_error(size_t rank, const caf::error& error);

 private:
  std::vector<std::string> names_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  engine::Executor::Done done_;
  std::vector<engine::RankReply> replies_;
  size_t pending_;
  bool finished_ = false;
};

/// For handlers of event-based actors: requests whose replies arrive as
/// messages to `self`, so the actor keeps handling others meanwhile.
template <class Self>
class AsyncRankExecutor final : public engine::Executor {
 public:
  AsyncRankExecutor(Self self, RankGroup group) : self_(self), group_(std::move(group)) {}

  void collective(engine::RankCommand command, Done done) override {
    if (group_.workers.empty()) return done(internal_error("the executor has no ranks"));
    auto round = std::make_shared<CollectiveRound>(group_, command.what(), std::move(done));
    for (size_t r = 0; r < group_.workers.size(); ++r)
      self_->request(group_.workers[r], group_.timeout, rank_atom_v, command)
          .then([round, r](engine::RankReply& reply) { round->on_reply(r, std::move(reply)); },
                [round, r](caf::error& err) { round->on_error(r, err); });
  }

  const RankGroup& group() const { return group_; }

 private:
  Self self_;
  RankGroup group_;
};

/// For any thread that may block (not an actor's handler): sends to every
/// rank, then waits for every answer; `done` runs before collective() returns.
class BlockingRankExecutor final : public engine::Executor {
 public:
  BlockingRankExecutor(caf::actor_system& system, RankGroup group) : system_(&system), group_(std::move(group)) {}
  void collective(engine::RankCommand command, Done done) override;

 private:
  caf::actor_system* system_;
  RankGroup group_;
};

}  // namespace troupe::actors
