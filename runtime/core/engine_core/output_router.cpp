#include "runtime/core/engine_core/output_router.hpp"

#include <exception>
#include <utility>

#include "troupe/log.hpp"

namespace troupe::engine {

void OutputRouter::add(const std::string& id, Callback callback) {
  std::lock_guard lock(mu_);
  callbacks_[id] = std::make_shared<Callback>(std::move(callback));
  in_flight_++;
}

void OutputRouter::deliver(EngineCoreOutputs& batch) {
  // Lost, back after the ranks were rebuilt, or a better reason (the node actually lost
  // replaces a surviving rank's failed step: EngineCore::fail_lost).
  if (batch.health.ok() != healthy_.load() || !batch.health.ok()) {
    std::lock_guard lock(mu_);
    healthy_ = batch.health.ok();
    unhealthy_reason_ = batch.health.message();
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
  return unhealthy_reason_;
}

}  // namespace troupe::engine
