#include "runtime/core/sched/forward_batch_builder.hpp"

#include "troupe/check.hpp"

namespace troupe::sched {

ForwardBatch make_forward_batch(const SchedulerOutput& output) {
  TROUPE_CHECK(output.block_size > 0 || output.scheduled.empty(), "scheduler output without a block size");
  ForwardBatch batch;
  const auto num_tokens = static_cast<size_t>(output.num_scheduled_tokens);
  batch.token_ids.reserve(num_tokens);
  batch.positions.reserve(num_tokens);
  batch.slot_mapping.reserve(num_tokens);
  batch.query_start.reserve(output.scheduled.size() + 1);
  batch.query_start.push_back(0);
  const int64_t bs = output.block_size;
  for (const ScheduledRequest& s : output.scheduled) {
    const int64_t seq_len = s.num_computed_tokens + static_cast<int64_t>(s.token_ids.size());
    TROUPE_CHECK(static_cast<int64_t>(s.block_table.size()) * bs >= seq_len,
                 "block table too short for the scheduled tokens");
    for (size_t i = 0; i < s.token_ids.size(); ++i) {
      const int64_t pos = s.num_computed_tokens + static_cast<int64_t>(i);
      batch.token_ids.push_back(s.token_ids[i]);
      batch.positions.push_back(static_cast<int32_t>(pos));
      batch.slot_mapping.push_back(int64_t{s.block_table[static_cast<size_t>(pos / bs)]} * bs + pos % bs);
    }
    batch.query_start.push_back(static_cast<int32_t>(batch.token_ids.size()));
    batch.seq_lens.push_back(static_cast<int32_t>(seq_len));
    batch.block_tables.push_back(s.block_table);
    if (s.needs_logits) {
      // After the last known token, and after each draft (speculative decoding).
      const auto num_drafts = static_cast<int32_t>(s.draft_token_ids.size());
      for (int32_t row = batch.query_start.back() - 1 - num_drafts; row < batch.query_start.back(); ++row)
        batch.logits_indices.push_back(row);
    }
  }
  // Adapters only when some sequence has one: a base-model step keeps lora_ids empty.
  for (const ScheduledRequest& s : output.scheduled)
    if (s.lora_id != 0) {
      for (const ScheduledRequest& t : output.scheduled) batch.lora_ids.push_back(t.lora_id);
      break;
    }
  return batch;
}

}  // namespace troupe::sched
