// Typed messages between troupe's actors. Every type that crosses a process
// boundary has an inspect() overload (CAF 0.17 serialization); callbacks are
// process-local and whitelisted as such. Atom names are at most 10 characters.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine/request_types.hpp"
#include "troupe/attention.hpp"
#include "troupe/config.hpp"
#include "troupe/model.hpp"
#include "troupe/stats.hpp"

namespace troupe::actors {

/// A worker's answer to init: what was loaded, in how long.
struct WorkerInitReply {
  ModelInfo info;
  std::string platform;       // device_type of the active platform
  std::string device_name;
  double load_seconds = 0;
};

/// A worker's KV cache needs: geometry and the bytes it can give.
struct KvSizing {
  KvCacheSpec spec;
  int64_t available_bytes = 0;
};

/// A request the worker has not sampled for yet (or again, after preemption).
struct SamplingState {
  std::string request_id;
  sampling::SamplingParams params;
  uint64_t seed = 0;                        // the request's seed (given or drawn)
  std::vector<int32_t> prompt_token_ids;    // for penalties
  std::vector<int32_t> output_token_ids;    // produced so far (non-empty after preemption)
};

/// One step for a worker: the batch and who samples from which logits row.
struct StepInput {
  int64_t step = 0;
  ForwardBatch batch;
  std::vector<SamplingState> new_requests;  // first appearance (or re-admission) on this worker
  std::vector<std::string> finished_ids;    // forget these
  std::vector<std::string> sample_ids;      // request of each batch.logits_indices row
};

/// A sampled token and, when asked for, its logprobs.
struct SampledToken {
  int32_t token = -1;
  float logprob = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

struct StepOutput {
  int64_t step = 0;
  std::vector<SampledToken> tokens;         // one per sample_ids entry
  double model_seconds = 0;                 // inside execute_model
  double sample_seconds = 0;
};

/// What one request got in one step, as the scheduler reports it to the engine actor.
struct RequestDelta {
  std::string request_id;
  SampledToken token;
  bool finished = false;
  std::string finish_reason;  // "stop" (EOG / stop token), "length", "abort", "error"
  std::string stop_reason;    // the stop token id, if that ended it
  std::string error;
};

struct StepReport {
  std::vector<RequestDelta> deltas;
  std::vector<std::string> started_ids;     // scheduled for the first time this step
  SchedulerStats stats;
};

/// One step's stats as subscribers receive them.
struct StatsEvent {
  SchedulerStats scheduler;
  IterationStats iteration;
};

using OutputCallback = std::function<void(engine::RequestOutput)>;
using StatsCallback = std::function<void(const StatsEvent&)>;

/// What the engine actor needs to start a request (already tokenized and validated).
struct SubmitRequest {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  sampling::SamplingParams sampling;
  uint64_t seed = 0;
  std::string cache_salt;
  OutputCallback on_output;   // process-local
};

}  // namespace troupe::actors

CAF_BEGIN_TYPE_ID_BLOCK(troupe_actors, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::EngineConfig))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::ModelInfo))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::KvCacheSpec))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::SchedulerStats))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::IterationStats))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::WorkerInitReply))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::KvSizing))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::StepInput))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::StepOutput))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::StepReport))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::StatsEvent))

  CAF_ADD_ATOM(troupe_actors, troupe::actors, load_atom, "load")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, worker_atom, "worker")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, init_atom, "init")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, kv_spec_atom, "kv_spec")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, init_kv_atom, "init_kv")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, warmup_atom, "warmup")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, execute_atom, "execute")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, size_kv_atom, "size_kv")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, submit_atom, "submit")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, abort_atom, "abort")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, step_atom, "step")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, report_atom, "report")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, stats_atom, "stats")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, tick_atom, "tick")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, subscribe_atom, "subscribe")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, unsub_atom, "unsub")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, finish_atom, "finish")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, health_atom, "health")
  CAF_ADD_ATOM(troupe_actors, troupe::actors, scheduler_atom, "scheduler")
CAF_END_TYPE_ID_BLOCK(troupe_actors)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::SubmitRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StatsCallback)

#include "actors/serialization.hpp"
