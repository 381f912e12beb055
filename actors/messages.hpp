// The actor protocol: atoms, the process-local message types, the typed
// interface of every actor, and their CAF type IDs. The data that crosses a
// process (step input and output, stats, configs) is plain runtime data with
// inspect() overloads in actors/serialization.hpp; callbacks are
// process-local and whitelisted as such. Atom names are at most 10 characters.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/kv_cache_plan.hpp"
#include "runtime/core/routing/dp_router.hpp"
#include "runtime/protocol/rank_command.hpp"
#include "runtime/protocol/request_types.hpp"
#include "runtime/protocol/worker_protocol.hpp"
#include "troupe/attention.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/model.hpp"
#include "runtime/core/stats/engine_stats.hpp"

CAF_ADD_ATOM(troupe_actors, troupe::actors, load_atom, "load")
CAF_ADD_ATOM(troupe_actors, troupe::actors, worker_atom, "worker")
CAF_ADD_ATOM(troupe_actors, troupe::actors, rank_atom, "rank")
CAF_ADD_ATOM(troupe_actors, troupe::actors, submit_atom, "submit")
CAF_ADD_ATOM(troupe_actors, troupe::actors, abort_atom, "abort")
CAF_ADD_ATOM(troupe_actors, troupe::actors, step_atom, "step")
CAF_ADD_ATOM(troupe_actors, troupe::actors, stats_atom, "stats")
CAF_ADD_ATOM(troupe_actors, troupe::actors, tick_atom, "tick")
CAF_ADD_ATOM(troupe_actors, troupe::actors, subscribe_atom, "subscribe")
CAF_ADD_ATOM(troupe_actors, troupe::actors, unsub_atom, "unsub")
CAF_ADD_ATOM(troupe_actors, troupe::actors, report_atom, "report")
CAF_ADD_ATOM(troupe_actors, troupe::actors, challenge_atom, "challenge")
CAF_ADD_ATOM(troupe_actors, troupe::actors, hello_atom, "hello")
CAF_ADD_ATOM(troupe_actors, troupe::actors, reset_atom, "reset")
CAF_ADD_ATOM(troupe_actors, troupe::actors, comm_id_atom, "comm_id")
CAF_ADD_ATOM(troupe_actors, troupe::actors, sleep_atom, "sleep")
CAF_ADD_ATOM(troupe_actors, troupe::actors, wake_atom, "wake_up")
CAF_ADD_ATOM(troupe_actors, troupe::actors, sleeping_atom, "sleeping")
CAF_ADD_ATOM(troupe_actors, troupe::actors, lora_add_atom, "lora_add")
CAF_ADD_ATOM(troupe_actors, troupe::actors, lora_rm_atom, "lora_rm")
CAF_ADD_ATOM(troupe_actors, troupe::actors, watchdog_atom, "watchdog")
CAF_ADD_ATOM(troupe_actors, troupe::actors, deliver_atom, "deliver")
CAF_ADD_ATOM(troupe_actors, troupe::actors, replica_atom, "replica")

namespace troupe::actors {

using engine::CoreRequest;
using engine::ReplicaUpdate;
using engine::EngineCoreOutputs;
using engine::KvCachePlan;
using engine::KvSizing;
using engine::SampledToken;
using engine::SamplingState;
using engine::StepInput;
using engine::StatsEvent;
using engine::StepOutput;
using engine::WorkerInitReply;


using StatsCallback = std::function<void(const StatsEvent&)>;

// -- Typed interfaces ---------------------------------------------------------

/// One rank of the model (actors/worker_actor.hpp): it runs every all-ranks
/// command (runtime/protocol/rank_command.hpp) and answers with the command's
/// reply, or an error carrying its Status (actors/status_error.hpp).
using worker_actor = caf::typed_actor<caf::replies_to<rank_atom, engine::RankCommand>::with<engine::RankReply>>;

/// One per node: loads its plugins (load: answers the platform it would choose by
/// itself), activates the platform the head names and spawns workers on it
/// (worker: rank, platform plugin name), and reports what it loaded (the JSON of
/// `troupe plugins --json`).
/// (comm_id_atom, parallel, platform): a fresh communicator id made by this node's
/// platform (Platform::make_communicator_id), asked of the node of rank 0; a
/// non-empty parallel.communicator_host asks for one across hosts, listening
/// on the node's own --host (or on that host when the node listens on every
/// interface).
using plugin_host_actor = caf::typed_actor<
    caf::replies_to<load_atom>::with<std::string>,
    caf::replies_to<worker_atom, int32_t, std::string>::with<worker_actor>,
    caf::replies_to<comm_id_atom, ParallelConfig, std::string>::with<std::string>,
    caf::replies_to<report_atom>::with<std::string>>;

/// Hosts the EngineCore: requests in (admitted, their callbacks already with the engine's
/// OutputRouter; a request the core refuses ends there with its error), steps fanned out
/// to the workers, outputs straight to the OutputRouter and stats to the stat logger.
/// (reset_atom, workers): after lost ranks were rebuilt, start over with a
/// fresh core on these workers (their KV caches are empty).
/// Sleep mode: (sleep_atom, level) -> resident bytes the ranks freed, once every rank
/// sleeps (refused while requests are unfinished); (wake_atom, tags) wakes them
/// (the tags "weights", "kv_cache"; none: all); (sleeping_atom) -> the level (0: awake).
/// Requests submitted while asleep wait for the wake-up, at most the core's
/// sleep_wait_limit; (tick_atom) is the scheduler's own timer for that bound.
/// (deliver_atom): hands the outputs the core emitted to the OutputRouter; the core's sink
/// queues them and sends it after the next step's message, so the ranks run that step
/// while the callbacks run.
/// (watchdog_atom) is its one timer for the ranks' answers (RankGroup::timeout): rank
/// requests carry no CAF timeout, which would keep a clock entry per request until it
/// expired, answered or not.
/// LoRA: (lora_add, id, path) has every rank load the adapter, then lets requests name the
/// id; (lora_rm, id) refuses while unfinished requests use it, else every rank drops it.
using scheduler_actor = caf::typed_actor<
    caf::reacts_to<submit_atom, CoreRequest>,
    caf::reacts_to<abort_atom, std::string>,
    caf::reacts_to<step_atom>,
    caf::reacts_to<tick_atom>,
    caf::reacts_to<watchdog_atom>,
    caf::reacts_to<deliver_atom>,
    caf::replies_to<reset_atom, std::vector<worker_actor>>::with<bool>,
    caf::replies_to<sleep_atom, int32_t>::with<int64_t>,
    caf::replies_to<wake_atom, std::vector<std::string>>::with<bool>,
    caf::replies_to<sleeping_atom>::with<int32_t>,
    caf::replies_to<lora_add_atom, int64_t, std::string>::with<bool>,
    caf::replies_to<lora_rm_atom, int64_t>::with<bool>>;

/// The router of data parallel replicas (actors/router_actor.hpp): (submit_atom, request)
/// goes to the replica engine::DpRouter chooses (or the one the request pins), (abort_atom,
/// id) to the replica that has it; (replica_atom, update) is each replica's scheduler
/// reporting its load, KV events, finished requests and health after each output.
using dp_router_actor = caf::typed_actor<
    caf::reacts_to<submit_atom, CoreRequest>,
    caf::reacts_to<abort_atom, std::string>,
    caf::reacts_to<replica_atom, ReplicaUpdate>>;

/// Whoever wants every step's stats (local or in another process).
using stats_subscriber_actor = caf::typed_actor<caf::reacts_to<stats_atom, StatsEvent>>;

/// Feeds stat loggers, plugins and subscribers.
using stat_logger_actor = caf::typed_actor<
    caf::reacts_to<stats_atom, StatsEvent>,
    caf::reacts_to<tick_atom>,
    caf::reacts_to<subscribe_atom, stats_subscriber_actor>,
    caf::reacts_to<unsub_atom, stats_subscriber_actor>,
    caf::reacts_to<subscribe_atom, uint64_t, StatsCallback>,
    caf::replies_to<unsub_atom, uint64_t>::with<bool>>;

/// What a process publishes on the network: a gate that hands `Handle` only
/// to a peer that proves it knows the shared secret (actors/gate_actor.hpp).
///   (challenge_atom) -> nonce;  (hello_atom, nonce, proof) -> Handle
template <class Handle>
using gate_actor = caf::typed_actor<
    caf::replies_to<challenge_atom>::with<std::string>,
    caf::replies_to<hello_atom, std::string, std::string>::with<Handle>>;

/// `troupe node` publishes this: the node's plugin host behind a gate.
using node_gate_actor = gate_actor<plugin_host_actor>;
/// `troupe serve --stats-port` publishes this: the stat logger behind a gate.
using stats_gate_actor = gate_actor<stat_logger_actor>;

}  // namespace troupe::actors

CAF_BEGIN_TYPE_ID_BLOCK(troupe_actors, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::EngineConfig))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::ModelInfo))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::KvCacheSpec))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::SchedulerStats))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::IterationStats))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::WorkerInitReply))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::KvSizing))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::KvCachePlan))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::StepInput))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::StepOutput))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::RankCommand))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::RankReply))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::CoreRequest))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::EngineCoreOutputs))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::engine::StatsEvent))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::worker_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::plugin_host_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::scheduler_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::stats_subscriber_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::stat_logger_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::node_gate_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::actors::stats_gate_actor))
  CAF_ADD_TYPE_ID(troupe_actors, (troupe::ParallelConfig))
  CAF_ADD_TYPE_ID(troupe_actors, (std::vector<int64_t>))
  CAF_ADD_TYPE_ID(troupe_actors, (std::vector<std::string>))
CAF_END_TYPE_ID_BLOCK(troupe_actors)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StatsCallback)
// Process-local: KV events go from a replica's scheduler to the router in the same process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::engine::ReplicaUpdate)

#include "actors/serialization.hpp"
