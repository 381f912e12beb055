// Flattens a SchedulerOutput into the ForwardBatch a worker runs: one row per
// scheduled token, with its position, KV slot and which rows need logits.
#pragma once

#include "runtime/core/sched/scheduler.hpp"
#include "troupe/model.hpp"

namespace troupe::sched {

/// slot = block_table[pos / block_size] * block_size + pos % block_size.
/// Logits rows are the last token of each request with needs_logits, in
/// scheduled order.
ForwardBatch make_forward_batch(const SchedulerOutput& output);

}  // namespace troupe::sched
