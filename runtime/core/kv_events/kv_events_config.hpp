// vLLM's KVEventsConfig (`--kv-events-config JSON`): whether the engine publishes its KV
// cache events for external routers, and where (a ZMQ PUB socket, a replay socket).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "troupe/status.hpp"

namespace troupe::engine {

struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  /// "null" or "zmq"; vLLM's default: "zmq" when events are enabled, else "null".
  std::string publisher = "null";
  /// The PUB socket: bound when it holds "*" or "::" or is ipc:// or inproc://, else
  /// connected (vLLM's rule). Replica r > 0 uses the TCP port + r (inproc: "_dp<r>").
  std::string endpoint = "tcp://*:5557";
  /// A ROUTER socket answering replay requests (an 8-byte big-endian start sequence);
  /// none when unset. Offset per replica as the endpoint.
  std::optional<std::string> replay_endpoint;
  int64_t buffer_steps = 10000;     // batches kept per replica for replay
  int64_t hwm = 100000;             // the PUB socket's send high-water mark
  int64_t max_queue_size = 100000;  // batches waiting for the publisher thread; more are dropped, logged
  std::string topic;

  /// Whether events go out (enabled, and a publisher other than "null").
  bool publishes() const { return enable_kv_cache_events && publisher != "null"; }

  /// vLLM's JSON object: every key is one of the fields above (and "hwm" etc.); an unknown
  /// key, a wrong type or a bad value is invalid_argument naming it.
  static Result<KvEventsConfig> parse(const std::string& json);
};

/// `endpoint` for replica `replica` as vLLM's ZmqEventPublisher.offset_endpoint_port makes
/// it: unchanged for replica 0; tcp: the port + replica; inproc: "<endpoint>_dp<replica>";
/// anything else is invalid_argument.
Result<std::string> offset_endpoint(const std::string& endpoint, int32_t replica);

}  // namespace troupe::engine
