// Why a request ended: one enum from the scheduler to the HTTP answer.
#pragma once

namespace troupe::sched {

enum class FinishReason { stop, length, abort, error };

/// "stop", "length", "abort", "error" (the OpenAI/FinishedRequestStats words).
const char* to_string(FinishReason reason);

}  // namespace troupe::sched

namespace troupe {
using sched::FinishReason;
}  // namespace troupe
