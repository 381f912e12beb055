#include "runtime/core/sched/request.hpp"

#include <utility>

#include "troupe/check.hpp"

namespace troupe::sched {

const char* to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::waiting: return "waiting";
    case RequestStatus::running: return "running";
    case RequestStatus::preempted: return "preempted";
    case RequestStatus::finished_stopped: return "finished_stopped";
    case RequestStatus::finished_length: return "finished_length";
    case RequestStatus::finished_aborted: return "finished_aborted";
    case RequestStatus::finished_error: return "finished_error";
  }
  return "unknown";
}

bool is_finished(RequestStatus status) {
  return status != RequestStatus::waiting && status != RequestStatus::running &&
         status != RequestStatus::preempted;
}

RequestStatus finished_status(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return RequestStatus::finished_stopped;
    case FinishReason::length: return RequestStatus::finished_length;
    case FinishReason::abort: return RequestStatus::finished_aborted;
    case FinishReason::error: return RequestStatus::finished_error;
  }
  return RequestStatus::finished_error;
}

Request::Request(NewRequest spec, int64_t arrival_order)
    : id_(std::move(spec.id)),
      prompt_(std::move(spec.prompt_token_ids)),
      all_(prompt_),
      max_tokens_(spec.max_tokens),
      arrival_order_(arrival_order),
      priority_(spec.priority),
      cache_salt_(std::move(spec.cache_salt)),
      lora_id_(spec.lora_id) {}

void Request::set_num_computed_tokens(int64_t n) {
  TROUPE_CHECK(n >= 0 && n <= num_tokens(), "num_computed_tokens out of range");
  num_computed_tokens_ = n;
}

void Request::append_output_token(int32_t token) {
  output_.push_back(token);
  all_.push_back(token);
}

}  // namespace troupe::sched
