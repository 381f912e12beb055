// Publishing KV cache events for external routers, as vLLM's ZmqEventPublisher does:
// per replica (data parallel rank) a PUB socket at the configured endpoint, offset by the
// replica's index, that sends each batch as three frames (topic, an 8-byte big-endian
// sequence number, the msgpack EventBatch), and, when a replay endpoint is configured, a
// ROUTER socket that answers a request [identity, "", start sequence (8 bytes, big-endian)]
// with every buffered batch from there on ([identity, "", seq, payload] each) and then
// [identity, "", -1 as 8 bytes, ""]. Replicas' schedulers hand batches over; one thread
// encodes, sends and answers replays.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/core/kv_events/kv_event_encoding.hpp"
#include "runtime/core/kv_events/kv_events_config.hpp"
#include "runtime/core/sched/kv_events.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class KvEventPublisher {
 public:
  virtual ~KvEventPublisher() = default;
  /// Queues one batch of replica `replica`'s events (its scheduler's thread; never blocks:
  /// past max_queue_size a batch is dropped and logged).
  virtual void publish(int32_t replica, const std::vector<sched::KvEvent>& events) = 0;
};

/// The ZMQ publisher for `num_replicas` replicas. Errors name the endpoint that could not
/// be bound or connected (a port in use) and the replica.
Result<std::shared_ptr<KvEventPublisher>> make_zmq_kv_event_publisher(const KvEventsConfig& config,
                                                                      int32_t num_replicas, LoraNameFn lora_name = {});

}  // namespace troupe::engine
