#include "runtime/protocol/finish_reason.hpp"

namespace troupe::sched {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
  }
  return "unknown";
}

}  // namespace troupe::sched
