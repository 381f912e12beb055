#include "actors/kv_cache_actor.hpp"

#include <caf/all.hpp>

#include <memory>

#include "actors/status_error.hpp"
#include "runtime/engine/kv_cache_plan.hpp"

namespace troupe::actors {
namespace {

struct KvCacheState {
  std::chrono::milliseconds rank_timeout{0};
  static inline const char* name = "troupe.kv_cache";
};

using Self = kv_cache_actor::stateful_pointer<KvCacheState>;

/// Fan-out bookkeeping of one sizing round.
struct Sizing {
  std::vector<worker_actor> workers;
  EngineConfig config;
  int64_t context_length = 0;
  caf::typed_response_promise<KvCachePlan> promise;
  std::vector<KvSizing> ranks;
  size_t pending = 0;
  bool failed = false;

  void fail(const Status& s) {
    if (failed) return;
    failed = true;
    promise.deliver(to_error(s));
  }
};

void allocate_on_workers(Self self, std::shared_ptr<Sizing> sz) {
  auto plan = engine::plan_kv_cache(sz->ranks, sz->config, sz->context_length);
  if (!plan) return sz->fail(plan.status());
  engine::log_kv_cache_plan(*plan);
  sz->pending = sz->workers.size();
  for (size_t r = 0; r < sz->workers.size(); ++r) {
    self->request(sz->workers[r], self->state.rank_timeout, init_kv_atom_v, plan->spec, plan->num_blocks)
        .then(
            [=, plan = *plan](bool) {
              if (--sz->pending == 0 && !sz->failed) sz->promise.deliver(plan);
            },
            [=](caf::error& err) { sz->fail(to_status(err, "rank " + std::to_string(r) + " allocating the KV cache")); });
  }
}

kv_cache_actor::behavior_type kv_cache_behavior(Self self, std::chrono::milliseconds rank_timeout) {
  self->state.rank_timeout = rank_timeout;
  return {
      [=](size_kv_atom, std::vector<worker_actor>& workers, EngineConfig& config,
          int64_t context_length) -> caf::typed_response_promise<KvCachePlan> {
        auto sz = std::make_shared<Sizing>();
        sz->promise = self->make_response_promise<KvCachePlan>();
        if (workers.empty()) {
          sz->fail(invalid_argument("no workers to size a KV cache for"));
          return sz->promise;
        }
        sz->workers = std::move(workers);
        sz->config = std::move(config);
        sz->context_length = context_length;
        sz->ranks.resize(sz->workers.size());
        sz->pending = sz->workers.size();
        for (size_t r = 0; r < sz->workers.size(); ++r) {
          self->request(sz->workers[r], self->state.rank_timeout, kv_spec_atom_v)
              .then(
                  [=](KvSizing& s) {
                    sz->ranks[r] = s;
                    if (--sz->pending == 0 && !sz->failed) allocate_on_workers(self, sz);
                  },
                  [=](caf::error& err) { sz->fail(to_status(err, "rank " + std::to_string(r) + " sizing the KV cache")); });
        }
        return sz->promise;
      },
  };
}

}  // namespace

kv_cache_actor spawn_kv_cache_actor(caf::actor_system& system, std::chrono::milliseconds rank_timeout) {
  return system.spawn(kv_cache_behavior, rank_timeout);
}

}  // namespace troupe::actors
