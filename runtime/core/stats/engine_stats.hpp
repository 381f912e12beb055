// Numbers the engine reports: per step (SchedulerStats, IterationStats) and
// per finished request (FinishedRequestStats). Plain data, copyable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// Speculative decoding in one step (vLLM's SpecDecodingStats): drafts verified and
/// accepted. All zero when speculative decoding is off.
struct SpecDecodingStats {
  int64_t num_drafts = 0;            // requests that had draft tokens verified
  int64_t num_draft_tokens = 0;      // draft tokens verified
  int64_t num_accepted_tokens = 0;   // of those, accepted
  /// Accepted drafts by position in the draft (index 0: the first draft token).
  std::vector<int64_t> num_accepted_tokens_per_pos;
};

/// The scheduler's state after one step.
struct SchedulerStats {
  int64_t step = 0;
  int num_running_reqs = 0;
  int num_waiting_reqs = 0;
  double kv_cache_usage = 0.0;           // fraction of KV blocks in use, 0..1
  int64_t prefix_cache_queries = 0;      // tokens looked up in the prefix cache this step
  int64_t prefix_cache_hits = 0;         // of those, tokens found
  int64_t num_preempted_reqs = 0;        // preemptions this step
  int64_t num_scheduled_tokens = 0;
  double step_seconds = 0.0;             // wall time of the whole step
  double model_seconds = 0.0;            // of which inside execute_model
  int64_t communicator_bytes = 0;        // payload through the ranks' communicators, all ranks
  double communicator_seconds = 0.0;     // the longest any rank spent communicating
  int sleep_level = 0;                   // sleep mode: 0 awake, else the level the engine sleeps at
  /// Bytes the driver rank's live structured-output grammars hold (lexers built lazily included).
  int64_t structured_output_bytes = 0;
  SpecDecodingStats spec_decoding;       // this step's speculative decoding
};

/// One finished request.
struct FinishedRequestStats {
  std::string request_id;
  std::string finish_reason;             // "stop", "length", "abort", "error"
  int64_t num_prompt_tokens = 0;
  int64_t num_generation_tokens = 0;
  double e2e_latency_s = 0.0;
  double queued_time_s = 0.0;
  double prefill_time_s = 0.0;
  double decode_time_s = 0.0;
  double time_to_first_token_s = 0.0;
  double mean_time_per_output_token_s = 0.0;
};

/// What happened to requests during one step.
struct IterationStats {
  int64_t num_prompt_tokens = 0;         // prompt tokens computed this step
  int64_t num_generation_tokens = 0;     // tokens generated this step
  std::vector<double> time_to_first_tokens_s;  // requests that got their first token
  std::vector<double> inter_token_latencies_s; // other requests' token gaps
  std::vector<FinishedRequestStats> finished_requests;
};

}  // namespace troupe
