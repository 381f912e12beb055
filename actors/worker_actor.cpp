#include "actors/worker_actor.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "actors/drop_unexpected.hpp"
#include "actors/status_error.hpp"
#include "runtime/engine/worker_runner.hpp"

namespace troupe::actors {
namespace {

struct WorkerState {
  const Platform* platform = nullptr;
  std::unique_ptr<engine::WorkerRunner> runner;
  static inline const char* name = "troupe.worker";
};

using Self = worker_actor::stateful_pointer<WorkerState>;

/// The loaded runner, or the error every message but init gets before it.
template <class T>
caf::result<T> without_model() {
  return to_error(unavailable("the worker has no model loaded (init first)"));
}

template <class T>
caf::result<T> reply(Result<T> r) {
  if (!r) return to_error(r.status());
  return std::move(r).value();
}

caf::result<bool> reply(const Status& s) {
  if (!s) return to_error(s);
  return true;
}

worker_actor::behavior_type worker_behavior(Self self, const Platform* platform) {
  drop_unexpected_messages(self);
  self->state.platform = platform;
  return {
      [=](init_atom, EngineConfig& config, int32_t rank) -> caf::result<WorkerInitReply> {
        auto runner = engine::WorkerRunner::create(*self->state.platform, config, rank);
        if (!runner) return to_error(runner.status());
        self->state.runner = std::move(runner).value();
        return self->state.runner->init_reply();
      },
      [=](kv_spec_atom) -> caf::result<KvSizing> {
        auto& r = self->state.runner;
        if (!r) return without_model<KvSizing>();
        return reply(r->kv_sizing());
      },
      [=](init_kv_atom, KvCacheSpec& spec, int64_t num_blocks) -> caf::result<bool> {
        auto& r = self->state.runner;
        if (!r) return without_model<bool>();
        return reply(r->initialize_cache(spec, num_blocks));
      },
      [=](warmup_atom) -> caf::result<bool> {
        auto& r = self->state.runner;
        if (!r) return without_model<bool>();
        return reply(r->warm_up());
      },
      [=](execute_atom, StepInput& in) -> caf::result<StepOutput> {
        auto& r = self->state.runner;
        if (!r) return without_model<StepOutput>();
        return reply(r->execute(std::move(in)));
      },
      [=](sleep_atom, int32_t level) -> caf::result<int64_t> {
        auto& r = self->state.runner;
        if (!r) return without_model<int64_t>();
        return reply(r->sleep(level));
      },
      [=](wake_atom, const std::string& tags) -> caf::result<bool> {
        auto& r = self->state.runner;
        if (!r) return without_model<bool>();
        std::vector<std::string> list;
        for (size_t at = 0; at < tags.size();) {
          const size_t comma = std::min(tags.find(',', at), tags.size());
          if (comma > at) list.push_back(tags.substr(at, comma - at));
          at = comma + 1;
        }
        return reply(r->wake_up(list));
      },
      [=](lora_add_atom, int64_t id, const std::string& path) -> caf::result<bool> {
        auto& r = self->state.runner;
        if (!r) return without_model<bool>();
        return reply(r->add_lora(id, path));
      },
      [=](lora_rm_atom, int64_t id) -> caf::result<bool> {
        auto& r = self->state.runner;
        if (!r) return without_model<bool>();
        return reply(r->remove_lora(id));
      },
      [=](lora_list_atom) -> caf::result<std::vector<int64_t>> {
        auto& r = self->state.runner;
        if (!r) return without_model<std::vector<int64_t>>();
        return reply(r->list_loras());
      },
      [=](lora_pin_atom, int64_t id) -> caf::result<bool> {
        auto& r = self->state.runner;
        if (!r) return without_model<bool>();
        return reply(r->pin_lora(id));
      },
  };
}

}  // namespace

worker_actor spawn_worker_actor(caf::actor_system& system, const Platform* platform) {
  return system.spawn<caf::detached>(worker_behavior, platform);
}

}  // namespace troupe::actors
