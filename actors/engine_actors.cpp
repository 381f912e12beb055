#include "actors/engine_actors.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <climits>

#include "actors/scheduler_actor.hpp"

namespace troupe::actors {

engine::EngineCoreConfig core_config(const EngineConfig& config, const engine::KvCachePlan& plan) {
  engine::EngineCoreConfig core;
  core.scheduler.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  core.scheduler.max_num_seqs = config.scheduler.max_num_seqs;
  core.scheduler.max_model_len = plan.max_model_len;
  core.scheduler.max_loras = config.lora.enable_lora ? std::max(1, config.lora.max_loras) : 0;
  core.kv.num_blocks = static_cast<int32_t>(std::min<int64_t>(plan.num_blocks, INT32_MAX));
  core.kv.block_size = plan.spec.block_size;
  core.kv.enable_prefix_caching = config.cache.enable_prefix_caching;
  core.kv.sliding_window = plan.sliding_window;
  core.sleep_wait_limit = std::chrono::milliseconds(static_cast<int64_t>(config.model.sleep_wait_timeout_s * 1000));
  // A pooling input runs whole in one step: its hidden states are pooled at once,
  // so neither chunks nor prefix-cache hits (an encoder keeps no KV to reuse).
  if (config.model.runner == "pooling") {
    core.scheduler.enable_chunked_prefill = false;
    core.kv.enable_prefix_caching = false;
  }
  return core;
}

EngineActors spawn_engine_actors(caf::actor_system& system, EngineActorsSetup setup) {
  EngineActors a;
  a.stat_logger = spawn_stat_logger_actor(system, std::move(setup.stat_loggers));
  SchedulerSetup sched;
  sched.core = core_config(setup.config, setup.kv_plan);
  sched.core.policy = std::move(setup.policy);
  sched.tokenizer = setup.tokenizer;
  sched.workers = std::move(setup.workers);
  sched.rank_places = std::move(setup.rank_places);
  sched.router = std::move(setup.router);
  sched.stat_logger = a.stat_logger;
  sched.step_timeout = setup.step_timeout;
  a.scheduler = spawn_scheduler_actor(system, std::move(sched));
  return a;
}

}  // namespace troupe::actors
