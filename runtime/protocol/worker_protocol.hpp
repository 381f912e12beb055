// What travels between the engine core and the ranks of a model: the
// replies of a worker's start-up, one step's input and its sampled output.
// Plain data; actors/serialization.hpp says how each crosses a process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/protocol/pooling_params.hpp"
#include "runtime/protocol/sampling_params.hpp"
#include "troupe/attention.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// A worker's answer to init: what was loaded, in how long.
struct WorkerInitReply {
  ModelInfo info;
  std::string platform;       // device_type of the active platform
  std::string device_name;
  double load_seconds = 0;
};

/// A rank's KV cache needs: geometry and the bytes it can give.
struct KvSizing {
  KvCacheSpec spec;
  int64_t available_bytes = 0;
};

/// A request the driver rank has not sampled for yet (or again, after preemption).
/// A pooling request is pooled instead of sampled.
struct SamplingState {
  std::string request_id;
  sampling::SamplingParams params;
  bool pooling = false;
  PoolingParams pooling_params;
  uint64_t seed = 0;                        // the request's seed (given or drawn)
  std::vector<int32_t> prompt_token_ids;    // for penalties
  std::vector<int32_t> output_token_ids;    // produced so far (non-empty after preemption)
};

/// One step for every rank: the batch, and who samples from which logits row.
struct StepInput {
  int64_t step = 0;
  ForwardBatch batch;
  std::vector<SamplingState> new_requests;  // first appearance (or re-admission) on the driver
  std::vector<std::string> finished_ids;    // forget these
  /// Request of each sampled row group: batch.logits_indices holds 1 + draft_token_ids[i].size()
  /// rows for sample_ids[i] (just 1 without speculative decoding), in this order.
  std::vector<std::string> sample_ids;
  /// Speculative decoding: the drafts each sample_ids entry verifies this step (empty: none,
  /// or all empty when the vector is empty).
  std::vector<std::vector<int32_t>> draft_token_ids;
};

/// A sampled token and, when asked for, its logprobs; for a pooling request,
/// its pooled vector instead.
struct SampledToken {
  int32_t token = -1;
  float logprob = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  std::vector<float> embedding;
};

/// A request the driver rank cannot go on with (its structured output's grammar did not
/// compile there, or a token mask went over its limit): the core ends it with `error`;
/// its tokens of the step, if any, are dropped. Its neighbours go on.
struct RequestFailure {
  std::string request_id;
  Status error;
};

/// One rank's answer to a step. Only the driver rank samples: the others
/// answer with no tokens.
struct StepOutput {
  int64_t step = 0;
  int32_t rank = 0;
  /// Driver: 1 + num_accepted[i] tokens for sample_ids entry i, in order (one each when
  /// num_accepted is empty: no drafts were verified).
  std::vector<SampledToken> tokens;
  std::vector<int32_t> num_accepted;        // driver, speculative decoding: drafts accepted per entry
  /// Driver, speculative decoding: the drafts proposed for each entry's next step.
  std::vector<std::vector<int32_t>> draft_token_ids;
  /// Driver: requests that failed alone (RequestFailure).
  std::vector<RequestFailure> failed;
  double model_seconds = 0;                 // inside execute_model
  double sample_seconds = 0;
  /// Communication inside execute_model: this rank's, or (from the executor)
  /// all ranks' bytes and the longest time any rank spent.
  int64_t communicator_bytes = 0;
  double communicator_seconds = 0;
  /// Driver: bytes its live requests' structured-output grammars hold.
  int64_t structured_output_bytes = 0;
};

}  // namespace troupe::engine
