#include "actors/worker_actor.hpp"

#include <caf/all.hpp>

#include <memory>

#include "actors/drop_unexpected.hpp"
#include "actors/status_error.hpp"
#include "runtime/rank/runner/rank.hpp"

namespace troupe::actors {
namespace {

struct WorkerState {
  std::unique_ptr<engine::Rank> rank;
  static inline const char* name = "troupe.worker";
};

using Self = worker_actor::stateful_pointer<WorkerState>;

worker_actor::behavior_type worker_behavior(Self self, const Platform* platform, int32_t rank) {
  drop_unexpected_messages(self);
  self->state.rank = std::make_unique<engine::Rank>(*platform, rank);
  return {
      [=](rank_atom, engine::RankCommand& command) -> caf::result<engine::RankReply> {
        auto reply = self->state.rank->run(std::move(command));
        if (!reply) return to_error(reply.status());
        return std::move(reply).value();
      },
  };
}

}  // namespace

worker_actor spawn_worker_actor(caf::actor_system& system, const Platform* platform, int32_t rank) {
  return system.spawn<caf::detached>(worker_behavior, platform, rank);
}

}  // namespace troupe::actors
