// Pooling: one vector per sequence from its tokens' hidden states (vLLM's
// Pooler): the mean over the tokens, the first ([CLS]) or the last token,
// then optional L2 normalization. Runs on the driver rank, next to the hidden
// states, as sampling runs next to the logits: RowPooler finds each pooling
// request's rows in the step's batch, pool() reduces them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/protocol/pooling_params.hpp"
#include "runtime/protocol/worker_protocol.hpp"
#include "runtime/rank/runner/driver_requests.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"
#include "troupe/worker.hpp"

namespace troupe::engine {

/// Pools rows [0, num_tokens) of `hidden` ([num_tokens][hidden_size], one
/// sequence's tokens in order) into `out` (hidden_size, or `dimensions`).
/// Sums in double so the mean does not depend on the sequence length's rounding.
Status pool(const float* hidden, int64_t num_tokens, int64_t hidden_size, const PoolingParams& params,
            const PoolingDefaults& defaults, std::vector<float>* out);

/// The pooling runner's step on the driver rank.
class RowPooler {
 public:
  /// `rank` names this rank in errors; `defaults`: the model's pooling config.
  RowPooler(int32_t rank, PoolingDefaults defaults) : rank_(rank), defaults_(defaults) {}

  /// One vector per `sample_ids` request into out.tokens[i].embedding (token 0): its
  /// sequence's rows of result.hidden_states ([batch.num_tokens()][hidden_size]), found
  /// through the batch's logits row of that request (batch.logits_indices[i]). A request's
  /// whole prompt must be in the step; a generation request is invalid_argument.
  Status pool_rows(const std::vector<std::string>& sample_ids, const ForwardBatch& batch,
                   const ModelRunnerOutput& result, const DriverRequests& requests, StepOutput& out) const;

 private:
  int32_t rank_;
  PoolingDefaults defaults_;
};

}  // namespace troupe::engine
