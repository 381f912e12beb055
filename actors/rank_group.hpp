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

#include <algorithm>
#include <chrono>
#include <functional>
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
  /// The group's time-out passed: fails the round naming the first rank that has not answered.
  void on_deadline();
  bool finished() const { return finished_; }

 private:
  void fail_timeout(size_t rank);

  std::vector<std::string> names_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  engine::Executor::Done done_;
  std::vector<engine::RankReply> replies_;
  std::vector<bool> answered_;
  size_t pending_;
  bool finished_ = false;
};

/// For handlers of event-based actors: requests whose replies arrive as
/// messages to `self`, so the actor keeps handling others meanwhile.
///
/// The requests carry no CAF time-out: CAF 0.17 keeps a clock entry for each timed
/// request until its time-out expires, answered or not (two per step at 10 minutes
/// grew a head by ~160 MB under load). The executor keeps each round's deadline
/// instead, and the actor runs one timer for all of them: `arm(delay)` asks it for a
/// call to expire() after `delay` (it may coalesce), and expire() fails the rounds
/// past their deadline and says when the next one falls due.
template <class Self>
class AsyncRankExecutor final : public engine::Executor {
 public:
  using Clock = std::chrono::steady_clock;
  using Arm = std::function<void(std::chrono::milliseconds)>;

  AsyncRankExecutor(Self self, RankGroup group, Arm arm)
      : self_(self), group_(std::move(group)), arm_(std::move(arm)) {}

  void collective(engine::RankCommand command, Done done) override {
    if (group_.workers.empty()) return done(internal_error("the executor has no ranks"));
    auto round = std::make_shared<CollectiveRound>(group_, command.what(), std::move(done));
    for (size_t r = 0; r < group_.workers.size(); ++r)
      self_->request(group_.workers[r], caf::infinite, rank_atom_v, command)
          .then([round, r](engine::RankReply& reply) { round->on_reply(r, std::move(reply)); },
                [round, r](caf::error& err) { round->on_error(r, err); });
    if (group_.timeout.count() > 0 && !round->finished()) {
      // Rounds answered since: forgotten now, so the list holds only those in flight.
      std::erase_if(watched_, [](const Watched& w) {
        auto r = w.round.lock();
        return !r || r->finished();
      });
      watched_.push_back({round, Clock::now() + group_.timeout});
      if (arm_) arm_(group_.timeout);
    }
  }

  /// Fails every round whose deadline is at or before `now`; forgets finished ones.
  /// Returns the next deadline still pending, if any.
  std::optional<Clock::time_point> expire(Clock::time_point now) {
    std::optional<Clock::time_point> next;
    std::vector<std::shared_ptr<CollectiveRound>> due;
    std::erase_if(watched_, [&](const Watched& w) {
      auto round = w.round.lock();
      if (!round || round->finished()) return true;
      if (w.deadline <= now) {
        due.push_back(std::move(round));
        return true;
      }
      if (!next || w.deadline < *next) next = w.deadline;
      return false;
    });
    for (auto& round : due) round->on_deadline();  // after the scan: `done` may start a new round
    return next;
  }

  const RankGroup& group() const { return group_; }

 private:
  struct Watched {
    std::weak_ptr<CollectiveRound> round;
    Clock::time_point deadline;
  };
  Self self_;
  RankGroup group_;
  Arm arm_;
  std::vector<Watched> watched_;
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
