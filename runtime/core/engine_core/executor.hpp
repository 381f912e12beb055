// Executor: how the engine reaches every rank of a model. Its one primitive is
// collective(command), a typed equivalent of vLLM's collective_rpc: the same
// RankCommand runs on every rank, and the caller gets every reply in rank
// order or the first failure, naming the rank. Steps, start-up, KV sizing,
// sleep mode and LoRA all go through it. The in-process executor calls Ranks
// directly; the actors' executors send one worker message per rank.
#pragma once

#include <functional>
#include <vector>

#include "runtime/protocol/rank_command.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class Executor {
 public:
  using Replies = std::vector<RankReply>;
  using Done = std::function<void(Result<Replies>)>;
  virtual ~Executor() = default;

  /// Run `command` on every rank, then call `done` exactly once: with every
  /// rank's reply in rank order, or with the first failure (naming the rank).
  /// It may be called before collective() returns (in process) or later (actors).
  virtual void collective(RankCommand command, Done done) = 0;

  /// collective() with each rank's typed reply.
  template <class Command>
  void collective(Command command, std::function<void(Result<std::vector<typename Command::Reply>>)> done) {
    collective(RankCommand(std::move(command)), [done = std::move(done)](Result<Replies> replies) {
      done(typed_replies<Command>(std::move(replies)));
    });
  }

  /// collective(), waiting for the replies: only for callers that are not inside
  /// an actor's message handler (start-up, rebuilding ranks, the offline generator).
  template <class Command>
  Result<std::vector<typename Command::Reply>> run_on_all(Command command) {
    return typed_replies<Command>(wait_for(RankCommand(std::move(command))));
  }

  /// One step: the driver rank's output, with every rank's communication added
  /// up (bytes) and the longest time any rank spent in it.
  void execute(StepInput input, std::function<void(Result<StepOutput>)> done);

 private:
  Result<Replies> wait_for(RankCommand command);

  template <class Command>
  static Result<std::vector<typename Command::Reply>> typed_replies(Result<Replies> replies) {
    if (!replies) return replies.status();
    std::vector<typename Command::Reply> out;
    out.reserve(replies->size());
    for (auto& r : *replies) {
      auto typed = reply_as<Command>(std::move(r));
      if (!typed) return typed.status();
      out.push_back(std::move(typed).value());
    }
    return out;
  }
};

}  // namespace troupe::engine
