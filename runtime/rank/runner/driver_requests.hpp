// The driver rank's requests by id: each one's sampling state (parameters, seed,
// prompt, the tokens sampled so far, or its pooling parameters), from the step
// that brings it (StepInput::new_requests, again after a preemption) until the
// step that names it finished. The sampler appends the tokens it chooses; the
// pooler and the drafter only read.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/protocol/worker_protocol.hpp"

namespace troupe::engine {

class DriverRequests {
 public:
  /// A new request, or one resumed after a preemption: its state replaces any earlier one.
  void add(SamplingState state) {
    std::string id = state.request_id;
    states_.insert_or_assign(std::move(id), std::move(state));
  }
  void remove(const std::string& request_id) { states_.erase(request_id); }

  /// The request's state, or null when the driver has none.
  SamplingState* find(const std::string& request_id) {
    auto it = states_.find(request_id);
    return it == states_.end() ? nullptr : &it->second;
  }
  const SamplingState* find(const std::string& request_id) const {
    auto it = states_.find(request_id);
    return it == states_.end() ? nullptr : &it->second;
  }
  size_t size() const { return states_.size(); }

 private:
  std::unordered_map<std::string, SamplingState> states_;
};

}  // namespace troupe::engine
