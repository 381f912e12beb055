#include "actors/engine_actors.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <climits>

#include "troupe/check.hpp"

#include "actors/router_actor.hpp"
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
  if (setup.replicas.empty()) setup.replicas.push_back({setup.workers, setup.rank_places, setup.kv_plan});
  const auto n = static_cast<int32_t>(setup.replicas.size());
  std::shared_ptr<std::vector<scheduler_actor>> schedulers;
  const bool routed = n > 1;
  bool kv_events = setup.kv_publisher != nullptr;
  if (routed) {
    TROUPE_CHECK(setup.routing_policy != nullptr, "several replicas need a routing policy");
    kv_events = kv_events || setup.routing_policy->uses_prefix_cache();
    RouterSetup router;
    router.router = std::make_unique<engine::DpRouter>(n, setup.replicas.front().kv_plan.spec.block_size,
                                                       std::move(setup.routing_policy), setup.routing_policy_name);
    router.outputs = setup.router;
    router.schedulers = schedulers = std::make_shared<std::vector<scheduler_actor>>();
    a.router = spawn_router_actor(system, std::move(router));
  }
  for (int32_t r = 0; r < n; ++r) {
    auto& replica = setup.replicas[static_cast<size_t>(r)];
    SchedulerSetup sched;
    sched.core = core_config(setup.config, replica.kv_plan);
    sched.core.kv.kv_events = kv_events && sched.core.kv.enable_prefix_caching;
    sched.core.policy = setup.policy;
    sched.tokenizer = setup.tokenizer;
    sched.workers = std::move(replica.workers);
    sched.rank_places = std::move(replica.rank_places);
    sched.router = setup.router;
    sched.stat_logger = a.stat_logger;
    sched.step_timeout = setup.step_timeout;
    sched.replica = r;
    sched.router_actor = a.router;
    sched.kv_publisher = setup.kv_publisher;
    a.schedulers.push_back(spawn_scheduler_actor(system, std::move(sched)));
  }
  a.scheduler = a.schedulers.front();
  if (schedulers) *schedulers = a.schedulers;  // before any request: the engine starts taking them after this
  return a;
}

}  // namespace troupe::actors
