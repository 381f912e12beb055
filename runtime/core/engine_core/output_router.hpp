// Where each request's outputs go, on the caller's side of the engine (vLLM's
// AsyncLLM output handler): the callbacks of the requests in flight, called as
// the engine core emits each batch, with no actor relaying between the core and
// the caller, and the numbers Engine's synchronous getters read (requests in
// flight, health, the most requests one step ran). The scheduler actor calls
// deliver() and fail() from its one thread; callers add() from theirs. With data
// parallel replicas each replica's scheduler delivers here, and the health is
// per replica: the engine is healthy while one of them is.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/protocol/request_types.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class OutputRouter {
 public:
  using Callback = std::function<void(RequestOutput)>;

  /// One health per replica (data parallel rank); 1 by default. Call before serving.
  explicit OutputRouter(int32_t num_replicas = 1);

  /// `id`'s outputs go to `callback` from now until its last (finished) one; counted in flight.
  void add(const std::string& id, Callback callback);
  /// One batch of replica `replica`'s core: its health and step size first, then each delta
  /// to its caller (a delta of a request nobody added is dropped). A callback that throws is logged.
  void deliver(EngineCoreOutputs& batch, int32_t replica = 0);
  /// Ends `id` with finish reason error and `error` (the scheduler refused it).
  void fail(const std::string& id, Status error);

  int64_t in_flight() const { return in_flight_.load(); }
  int64_t max_running() const { return max_running_.load(); }
  /// While at least one replica serves.
  bool healthy() const { return num_healthy_.load() > 0; }
  /// Why no replica serves: the reason of the one replica, or "replica N: reason; ..." of each.
  std::string unhealthy_reason() const;
  int32_t num_replicas() const { return static_cast<int32_t>(health_.size()); }
  /// Each replica's health (ok: it serves), in index order.
  std::vector<Status> replica_health() const;

 private:
  void deliver_one(RequestOutput out);

  mutable std::mutex mu_;  // callbacks_ and health_; never held while a callback runs
  std::unordered_map<std::string, std::shared_ptr<Callback>> callbacks_;
  std::vector<Status> health_;  // per replica
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> max_running_{0};
  std::atomic<int32_t> num_healthy_{0};
};

}  // namespace troupe::engine
