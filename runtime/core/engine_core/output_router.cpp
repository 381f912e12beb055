#include "runtime/core/engine_core/output_router.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include "troupe/log.hpp"

namespace troupe::engine {

OutputRouter::OutputRouter(int32_t num_replicas)
    : health_(static_cast<size_t>(std::max<int32_t>(1, num_replicas))), num_healthy_(std::max<int32_t>(1, num_replicas)) {}

void OutputRouter::add(const std::string& id, Callback callback) {
  std::lock_guard lock(mu_);
  callbacks_[id] = std::make_shared<Callback>(std::move(callback));
  in_flight_++;
}

void OutputRouter::deliver(EngineCoreOutputs& batch, int32_t replica) {
  // Lost, back after the ranks were rebuilt, or a better reason (the node actually lost
  // replaces a surviving rank's failed step: EngineCore::fail_lost).
  if (replica >= 0 && static_cast<size_t>(replica) < health_.size()) {
    std::lock_guard lock(mu_);
    Status& h = health_[static_cast<size_t>(replica)];
    if (h.ok() != batch.health.ok()) num_healthy_ += batch.health.ok() ? 1 : -1;
    h = batch.health;
  }
  for (int64_t cur = max_running_.load();
       batch.num_scheduled_requests > cur && !max_running_.compare_exchange_weak(cur, batch.num_scheduled_requests);) {
  }
  for (auto& out : batch.outputs) deliver_one(std::move(out));
}

void OutputRouter::fail(const std::string& id, Status error) {
  RequestOutput out;
  out.request_id = id;
  out.finished = true;
  out.finish_reason = FinishReason::error;
  out.error = std::move(error);
  deliver_one(std::move(out));
}

void OutputRouter::deliver_one(RequestOutput out) {
  std::shared_ptr<Callback> callback;
  const bool finished = out.finished;
  {
    std::lock_guard lock(mu_);
    auto it = callbacks_.find(out.request_id);
    if (it == callbacks_.end()) return;
    callback = it->second;
    if (finished) callbacks_.erase(it);
  }
  std::string id = out.request_id;  // for the log line, should the callback throw
  try {
    (*callback)(std::move(out));
  } catch (const std::exception& e) {  // a caller's callback must not take the engine down
    TROUPE_LOG_ERROR("output callback of request {} threw: {}", id, e.what());
  }
  if (finished) in_flight_--;
}

std::string OutputRouter::unhealthy_reason() const {
  std::lock_guard lock(mu_);
  if (health_.size() == 1) return health_[0].message();
  std::string out;
  for (size_t r = 0; r < health_.size(); ++r)
    if (!health_[r].ok()) out += (out.empty() ? "" : "; ") + ("replica " + std::to_string(r) + ": " + health_[r].message());
  return out;
}

std::vector<Status> OutputRouter::replica_health() const {
  std::lock_guard lock(mu_);
  return health_;
}

}  // namespace troupe::engine
