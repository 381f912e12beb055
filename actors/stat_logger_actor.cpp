#include "actors/stat_logger_actor.hpp"

#include <caf/all.hpp>

#include <map>

#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct StatLoggerState {
  std::vector<std::shared_ptr<stats::EngineStatLogger>> loggers;
  double interval_s = 5.0;
  std::map<caf::actor_addr, stats_subscriber_actor> subscribers;
  std::map<uint64_t, StatsCallback> callbacks;
  static inline const char* name = "troupe.stat_logger";
};

std::chrono::milliseconds interval_of(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

void call_loggers(StatLoggerState& st, const StatsEvent& ev) {
  for (auto& l : st.loggers) {
    try {
      l->record(&ev.scheduler, &ev.iteration, ev.engine_index);
    } catch (const std::exception& e) {  // a plugin's logger must not take the engine down
      TROUPE_LOG_ERROR("stat logger failed in record(): {}", e.what());
    }
  }
}

using Self = stat_logger_actor::stateful_pointer<StatLoggerState>;

stat_logger_actor::behavior_type stat_logger_behavior(Self self, std::shared_ptr<StatLoggerSetup> setup) {
  auto& st = self->state;
  for (auto& l : setup->loggers) st.loggers.emplace_back(std::move(l));
  st.interval_s = setup->log_interval_s;
  for (auto& l : st.loggers) l->log_engine_initialized();
  self->set_down_handler([=](caf::down_msg& dm) { self->state.subscribers.erase(dm.source); });
  if (st.interval_s > 0)
    self->delayed_send(self, interval_of(st.interval_s), tick_atom_v);
  return {
      [=](stats_atom, const StatsEvent& ev) {
        auto& st = self->state;
        call_loggers(st, ev);
        for (auto& [addr, sub] : st.subscribers) self->send(sub, stats_atom_v, ev);
        for (auto& [id, cb] : st.callbacks) {
          try {
            cb(ev);
          } catch (const std::exception& e) {  // a subscriber's bug must not stop the stat logger
            TROUPE_LOG_ERROR("stats subscriber {} threw: {}", id, e.what());
          }
        }
      },
      [=](tick_atom) {
        for (auto& l : self->state.loggers) {
          try {
            l->log();
          } catch (const std::exception& e) {
            TROUPE_LOG_ERROR("stat logger failed in log(): {}", e.what());
          }
        }
        self->delayed_send(self, interval_of(self->state.interval_s), tick_atom_v);
      },
      [=](subscribe_atom, const stats_subscriber_actor& sub) {
        self->monitor(sub);
        self->state.subscribers[sub.address()] = sub;
      },
      [=](unsub_atom, const stats_subscriber_actor& sub) {
        self->demonitor(sub.address());
        self->state.subscribers.erase(sub.address());
      },
      [=](subscribe_atom, uint64_t id, StatsCallback& cb) { self->state.callbacks[id] = std::move(cb); },
      // Answers once the callback is gone, so Engine::unsubscribe_stats can promise
      // that it is never called again after it returns.
      [=](unsub_atom, uint64_t id) -> bool { return self->state.callbacks.erase(id) > 0; },
  };
}

}  // namespace

stat_logger_actor spawn_stat_logger_actor(caf::actor_system& system, StatLoggerSetup setup) {
  return system.spawn(stat_logger_behavior, std::make_shared<StatLoggerSetup>(std::move(setup)));
}

}  // namespace troupe::actors
