// `troupe serve`'s data parallel flags (vLLM's names): --data-parallel-size N replicas of
// the model behind one API, --data-parallel-size-local (how many run on this host; the
// others on --nodes), --routing-policy (troupe's: which replica serves a request) and
// --kv-events-config (vLLM's JSON: KV cache events for external routers). vLLM's flags
// for its own multi-host launch are refused with the troupe way: the head dials its nodes.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "actors/engine.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

struct DataParallelOptions {
  int data_parallel_size = 1;
  std::optional<int> data_parallel_size_local;
  std::string routing_policy = "prefix_affinity";
  std::string kv_events_config;
  // vLLM's launch flags troupe answers with a refusal naming the way it is done here.
  std::string data_parallel_address;
  std::optional<int> data_parallel_rpc_port;
  std::optional<int> data_parallel_start_rank;
  bool headless = false;
};

inline void add_data_parallel_options(CLI::App& sub, DataParallelOptions* o) {
  const char* group = "Data parallelism (replicas)";
  sub.add_option("--data-parallel-size", o->data_parallel_size,
                 "Replicas of the model behind this API, each with its own scheduler, KV cache and "
                 "tensor x pipeline parallel ranks (default 1)")
      ->group(group);
  sub.add_option("--data-parallel-size-local", o->data_parallel_size_local,
                 "Replicas on this host, in node processes this server starts; the others run on --nodes, "
                 "which they share evenly (default: all without --nodes, none with)")
      ->group(group);
  sub.add_option("--routing-policy", o->routing_policy,
                 "Which replica serves a request: prefix_affinity (default: the replica that holds the most of the "
                 "prompt in its prefix cache, unless it is busier than the rest), least_loaded, round_robin, or a "
                 "plugin's; a request may pin one with the X-data-parallel-rank header")
      ->group(group);
  sub.add_option("--kv-events-config", o->kv_events_config,
                 "vLLM's KV cache events for external routers, as JSON: {\"enable_kv_cache_events\": true, "
                 "\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": ..., "
                 "\"buffer_steps\": ..., \"topic\": ...}; replica r publishes on the port + r")
      ->group(group);
  const char* refused = "vLLM compatibility (accepted or refused by name)";
  sub.add_option("--data-parallel-address", o->data_parallel_address,
                 "refused: the head dials its nodes; name them with --nodes")
      ->group(refused);
  sub.add_option("--data-parallel-rpc-port", o->data_parallel_rpc_port,
                 "refused: the head dials its nodes; name them with --nodes")
      ->group(refused);
  sub.add_option("--data-parallel-start-rank", o->data_parallel_start_rank,
                 "refused: replicas are numbered by the head, local ones first")
      ->group(refused);
  sub.add_flag("--headless", o->headless, "refused: a host without the API server is a `troupe node`")->group(refused);
}

/// The flags into `eo` (config.parallel.data_parallel_size and the options), or one line
/// naming the flag at fault.
inline Status apply_data_parallel_options(const DataParallelOptions& o, engine::EngineOptions* eo) {
  auto refuse = [](const std::string& flag, const std::string& why) { return invalid_argument(flag + ": " + why); };
  if (!o.data_parallel_address.empty())
    return refuse("--data-parallel-address",
                  "troupe's head dials its nodes: start `troupe node` on each host and name them with --nodes");
  if (o.data_parallel_rpc_port)
    return refuse("--data-parallel-rpc-port", "troupe's head dials its nodes (--nodes HOST:PORT); there is no RPC port");
  if (o.data_parallel_start_rank)
    return refuse("--data-parallel-start-rank",
                  "the head numbers the replicas itself: local ones first, then those on --nodes in order");
  if (o.headless) return refuse("--headless", "a host that runs replicas without the API server is a `troupe node`");
  if (o.data_parallel_size < 1 || o.data_parallel_size > 64)
    return refuse("--data-parallel-size " + std::to_string(o.data_parallel_size), "must be in 1..64");
  eo->config.parallel.data_parallel_size = o.data_parallel_size;
  if (o.data_parallel_size_local) {
    if (*o.data_parallel_size_local < 0 || *o.data_parallel_size_local > o.data_parallel_size)
      return refuse("--data-parallel-size-local " + std::to_string(*o.data_parallel_size_local),
                    "must be in 0.." + std::to_string(o.data_parallel_size) + " (--data-parallel-size)");
    eo->data_parallel_size_local = *o.data_parallel_size_local;
  }
  eo->routing_policy = o.routing_policy;
  if (!o.kv_events_config.empty()) {
    auto parsed = engine::KvEventsConfig::parse(o.kv_events_config);
    if (!parsed) return parsed.status();
    eo->kv_events = std::move(parsed).value();
  }
  return {};
}

}  // namespace troupe::apps
