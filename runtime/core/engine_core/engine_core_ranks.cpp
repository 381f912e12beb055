// EngineCore's all-ranks operations while it serves: sleep mode and LoRA. Each
// is one collective call on the ranks (Executor::collective) plus the core's
// own state: the sleep level and the parts still asleep, the adapter ids
// requests may name.
#include <algorithm>
#include <utility>

#include "runtime/core/engine_core/engine_core.hpp"
#include "troupe/log.hpp"

namespace troupe::engine {
namespace {

bool names(const std::vector<std::string>& tags, const std::string& part) {
  return tags.empty() || std::find(tags.begin(), tags.end(), part) != tags.end();
}

Status restarted() { return unavailable("the engine restarted its ranks"); }

}  // namespace

void EngineCore::sleep(Executor& ranks, int level, std::function<void(Result<int64_t>)> done) {
  if (level != 1 && level != 2)
    return done(invalid_argument("sleep level must be 1 or 2, got " + std::to_string(level)));
  if (!healthy()) return done(unavailable("the engine is unhealthy: " + health_.message()));
  if (has_unfinished_requests() || step_in_flight()) {
    const SchedulerStats now = stats();
    return done(unavailable("the engine cannot sleep while requests are unfinished (" +
                            std::to_string(now.num_running_reqs) + " running, " +
                            std::to_string(now.num_waiting_reqs) + " waiting): finish or abort them first"));
  }
  set_sleep_level(level);  // no step starts from now on; requests wait
  weights_asleep_ = kv_asleep_ = true;
  ranks.collective(Sleep{level}, [done = std::move(done), level](Result<std::vector<int64_t>> freed) {
    if (!freed) return done(freed.status());
    int64_t total = 0;
    for (int64_t f : *freed) total += f;
    TROUPE_LOG_INFO("the engine sleeps at level {}: {:.1f} MiB of resident memory freed", level,
                    static_cast<double>(total) / (1 << 20));
    done(total);
  });
}

void EngineCore::wake_up(Executor& ranks, std::vector<std::string> tags, std::function<void(Result<bool>)> done) {
  const bool weights = names(tags, "weights"), kv = names(tags, "kv_cache");
  std::weak_ptr<int> alive = alive_;
  ranks.collective(WakeUp{std::move(tags)},
                   [this, alive, weights, kv, done = std::move(done)](Result<std::vector<Done>> woke) {
                     if (!woke) return done(woke.status());
                     if (alive.expired()) return done(restarted());
                     if (weights) weights_asleep_ = false;
                     if (kv) kv_asleep_ = false;
                     if (weights_asleep_ || kv_asleep_ || sleep_level_ == 0) return done(false);
                     set_sleep_level(0);
                     TROUPE_LOG_INFO("the engine is awake");
                     done(true);
                   });
}

void EngineCore::add_lora(Executor& ranks, int64_t lora_id, std::string path, std::function<void(Status)> done) {
  std::weak_ptr<int> alive = alive_;
  ranks.collective(AddLora{lora_id, std::move(path)},
                   [this, alive, &ranks, lora_id, done = std::move(done)](Result<std::vector<Done>> added) {
                     Status st = added.status();
                     if (st.ok()) st = alive.expired() ? restarted() : scheduler_.add_lora(lora_id);
                     if (st.ok()) return done(st);
                     // Some ranks may hold it: drop it there again (a rank without it answers not_found).
                     if (!alive.expired()) ranks.collective(RemoveLora{lora_id}, [](Result<std::vector<Done>>) {});
                     done(st);
                   });
}

void EngineCore::remove_lora(Executor& ranks, int64_t lora_id, std::function<void(Status)> done) {
  if (Status st = scheduler_.remove_lora(lora_id); !st.ok()) return done(st);
  ranks.collective(RemoveLora{lora_id}, [done = std::move(done)](Result<std::vector<Done>> removed) {
    done(removed.status());
  });
}

}  // namespace troupe::engine
