// EngineCore: the engine without actors (vLLM's EngineCore). It owns the
// scheduler and its KV block manager, output processing (one stop check,
// incremental detokenization, finish reasons) and the per-step stats. Its one
// entry point for running the model is step(Executor&); an Executor runs one
// scheduled batch on every rank and returns the driver rank's sampled tokens.
// What else every rank does while the engine serves (sleep mode, LoRA) goes
// through the same Executor (engine_core_ranks.cpp), with its state kept here.
// The offline generator drives it with an in-process executor; the scheduler
// actor is a mailbox around it with an executor that fans out to worker actors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/core/engine_core/executor.hpp"
#include "runtime/core/engine_core/request_tracker.hpp"
#include "runtime/protocol/request_types.hpp"
#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/core/sched/scheduler.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/core/stats/engine_stats.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

struct EngineCoreConfig {
  sched::SchedulerConfig scheduler;
  sched::KvCacheConfig kv;
  /// Orders the requests (--scheduler-cls); null: the built-in FCFS policy.
  std::shared_ptr<const SchedulerPolicy> policy;
  /// Sleep mode: a request waits this long at most while the engine sleeps (counted from
  /// its arrival, or from the fall asleep when it came earlier), then fails unavailable.
  std::chrono::milliseconds sleep_wait_limit = std::chrono::seconds(60);
};

/// A request as the core takes it: tokenized and validated by the caller.
struct CoreRequest {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  sampling::SamplingParams sampling;
  uint64_t seed = 0;          // the request's seed (given or drawn)
  std::string cache_salt;     // isolates its prefix-cache entries; empty: none
  int32_t priority = 0;       // lower is served first, under a policy that uses priorities
  int64_t lora_id = 0;        // the LoRA adapter it runs with (0: the base model)
  /// The replica that must serve it (vLLM's X-data-parallel-rank); -1: the router chooses.
  int32_t data_parallel_rank = -1;
  /// Set: a pooling request (the prompt only, one pooled vector back).
  std::optional<PoolingParams> pooling;
};

/// One step's stats, as stat loggers and subscribers receive them.
struct StatsEvent {
  SchedulerStats scheduler;
  IterationStats iteration;
  int32_t engine_index = 0;  // the replica (data parallel rank) that ran the step; 0 without replicas
};

/// What a step, an abort or a failure produced: deltas for callers and, when
/// has_stats, one step's stats for the stat loggers.
struct EngineCoreOutputs {
  std::vector<RequestOutput> outputs;
  bool has_stats = false;
  StatsEvent stats;
  int64_t num_scheduled_requests = 0;  // requests that ran in this step
  Status health;                       // not ok once the core gave up (a step failed)
  /// The prefix cache's changes since the previous outputs, in order (only with
  /// KvCacheConfig::kv_events); they stay in the engine's process.
  std::vector<sched::KvEvent> kv_events;
};

enum class StepStatus {
  idle,       // nothing to run, a step is in flight, or the core is unhealthy
  blocked,    // requests wait, but none fits until a request arrives, ends or is aborted
  started,    // handed to the executor; its outputs reach the sink when it completes
  asleep,     // requests wait while the engine sleeps: step again within sleep_wait_left()
};

class EngineCore {
 public:
  using Clock = std::chrono::steady_clock;
  using OutputSink = std::function<void(EngineCoreOutputs)>;

  /// `sink` receives every output: on step completion, abort and failure.
  EngineCore(EngineCoreConfig config, std::shared_ptr<const tokenizer::Tokenizer> tokenizer, OutputSink sink);
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  /// Queue a request. Errors: the core is unhealthy, a duplicate id, a request
  /// that can never fit (the scheduler's checks).
  Status add_request(CoreRequest request, Clock::time_point arrival = Clock::now());
  /// End a live request now (finish reason abort) and free its blocks; its
  /// final delta goes to the sink. False when it is not live.
  bool abort_request(const std::string& request_id);
  /// Schedule one step and run it on `executor`.
  StepStatus step(Executor& executor);
  /// End every live request with `error` and mark the core unhealthy (the first reason stays).
  void fail_all(const Status& error);
  /// A rank was lost (its process or its node's link is gone): as fail_all, but `reason`
  /// replaces an earlier reason that was not a loss. When a node dies, the surviving rank's
  /// step often fails first (its collective peer went away) and would name the wrong node;
  /// the loss names the one actually gone. A later loss keeps the first.
  void fail_lost(const Status& reason);
  /// Sleep mode (vLLM's) on every rank of `ranks`: refused for a level other than 1 or 2, an
  /// unhealthy core or unfinished requests; else no step starts from now on (requests wait),
  /// the prefix cache is forgotten (the KV cache's contents do not survive), and every rank
  /// sleeps. `done`: the resident bytes the ranks freed. The state reaches the sink as stats.
  void sleep(Executor& ranks, int level, std::function<void(Result<int64_t>)> done);
  /// Wakes the parts `tags` names ("weights", "kv_cache"; empty: both) on every rank. Once
  /// both are awake the core steps again: then `done(true)`, and the caller should step it.
  void wake_up(Executor& ranks, std::vector<std::string> tags, std::function<void(Result<bool>)> done);
  /// 0 when awake, else the level the ranks sleep at.
  int sleep_level() const { return sleep_level_; }
  /// While asleep: how long until the first waiting request reaches sleep_wait_limit
  /// (zero when one has); nullopt when awake or nothing waits. step() ends those.
  std::optional<Clock::duration> sleep_wait_left(Clock::time_point now) const;

  /// LoRA: every rank loads the adapter file, then requests may name `lora_id`
  /// (Scheduler::add_lora). A failure on any rank drops it from every rank again.
  void add_lora(Executor& ranks, int64_t lora_id, std::string path, std::function<void(Status)> done);
  /// Refused while live requests use the adapter (unavailable, "in use"); else no request
  /// may name it from now on, and every rank drops it.
  void remove_lora(Executor& ranks, int64_t lora_id, std::function<void(Status)> done);

  bool has_unfinished_requests() const { return scheduler_.has_unfinished_requests(); }
  bool step_in_flight() const { return in_flight_; }
  bool healthy() const { return health_.ok(); }
  const Status& health() const { return health_; }
  /// Running/waiting/KV usage now.
  SchedulerStats stats() const { return scheduler_.stats(); }
  const sched::Scheduler& scheduler() const { return scheduler_; }

 private:
  struct LiveRequest;
  struct InFlight;
  void complete_step(const InFlight& step, Result<StepOutput> result);
  void end_request(LiveRequest& request, FinishReason reason, Status error, EngineCoreOutputs& out);
  /// Hands `out` to the sink; with_stats adds the scheduler's state between steps and the requests ended since.
  void emit(EngineCoreOutputs out, bool with_stats);
  void set_sleep_level(int level);
  /// While asleep: ends every request that has waited sleep_wait_limit with unavailable.
  void expire_sleep_waits(Clock::time_point now);
  /// When a waiting request's time starts to count: its arrival, or the fall asleep.
  Clock::time_point wait_start(const LiveRequest& r) const;

  sched::Scheduler scheduler_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  OutputSink sink_;
  std::unordered_map<std::string, std::unique_ptr<LiveRequest>> requests_;
  std::vector<FinishedRequestStats> pending_finished_;  // ended between steps; reported with the next stats
  bool in_flight_ = false;
  /// Requests finished since the last step the ranks ran: they forget them with the next one.
  std::vector<std::string> unsent_finished_ids_;
  int sleep_level_ = 0;
  int64_t structured_output_bytes_ = 0;  // the driver's live grammars, from the last step
  Clock::time_point asleep_since_{};
  std::chrono::milliseconds sleep_wait_limit_;
  bool weights_asleep_ = false, kv_asleep_ = false;  // sleep mode: the parts not woken yet
  Status health_;
  bool health_is_loss_ = false;  // health_ came from fail_lost
  // Answers of the ranks may outlive the core (the scheduler actor replaces it after a
  // rebuild): their callbacks check this first.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace troupe::engine
