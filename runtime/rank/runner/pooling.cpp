#include "runtime/rank/runner/pooling.hpp"

#include <cmath>
#include <string>

namespace troupe::engine {

Status pool(const float* hidden, int64_t num_tokens, int64_t hidden_size, const PoolingParams& params,
            const PoolingDefaults& defaults, std::vector<float>* out) {
  if (num_tokens <= 0 || hidden_size <= 0) return invalid_argument("nothing to pool");
  const PoolingType type = params.type.value_or(defaults.type);
  std::vector<double> acc(static_cast<size_t>(hidden_size), 0.0);
  auto add_row = [&](int64_t t) {
    const float* row = hidden + t * hidden_size;
    for (int64_t i = 0; i < hidden_size; ++i) acc[i] += row[i];
  };
  switch (type) {
    case PoolingType::mean:
      for (int64_t t = 0; t < num_tokens; ++t) add_row(t);
      for (auto& v : acc) v /= static_cast<double>(num_tokens);
      break;
    case PoolingType::cls: add_row(0); break;
    case PoolingType::last: add_row(num_tokens - 1); break;
  }
  int64_t dims = hidden_size;
  if (params.dimensions) {
    if (!defaults.matryoshka)
      return invalid_argument("this model does not support 'dimensions' (it is not a matryoshka model)");
    if (*params.dimensions < 1 || *params.dimensions > hidden_size)
      return invalid_argument("dimensions must be in 1.." + std::to_string(hidden_size) + ", got " +
                              std::to_string(*params.dimensions));
    dims = *params.dimensions;
  }
  acc.resize(static_cast<size_t>(dims));
  if (params.normalize.value_or(defaults.normalize)) {
    double norm = 0;
    for (double v : acc) norm += v * v;
    norm = std::sqrt(norm);
    if (norm > 0)
      for (auto& v : acc) v /= norm;
  }
  out->assign(acc.begin(), acc.end());
  return {};
}

Status RowPooler::pool_rows(const std::vector<std::string>& sample_ids, const ForwardBatch& b,
                            const ModelRunnerOutput& result, const DriverRequests& requests, StepOutput& out) const {
  const int64_t hidden = result.hidden_size;
  if (hidden <= 0 || static_cast<int64_t>(result.hidden_states.size()) != hidden * b.num_tokens())
    return internal_error("rank " + std::to_string(rank_) + " returned " + std::to_string(result.hidden_states.size()) +
                          " hidden-state values for " + std::to_string(b.num_tokens()) + " rows");
  out.tokens.resize(sample_ids.size());
  for (size_t i = 0; i < sample_ids.size(); ++i) {
    const SamplingState* req = requests.find(sample_ids[i]);
    if (!req) return internal_error("no state for pooling request " + sample_ids[i]);
    if (!req->pooling)
      return invalid_argument("request " + sample_ids[i] + " asks for generation, but this model runs as a pooling model");
    // The sequence whose last row is this logits row; its prompt is all in this step.
    const int32_t row = b.logits_indices[i];
    int32_t seq = 0;
    while (seq + 1 < static_cast<int32_t>(b.query_start.size()) && b.query_start[seq + 1] <= row) ++seq;
    const int32_t begin = b.query_start[seq];
    const int32_t count = b.query_start[seq + 1] - begin;
    if (b.seq_lens[seq] != count)
      return internal_error("pooling request " + sample_ids[i] + " was split over steps (chunked prefill)");
    TROUPE_RETURN_IF_ERROR(pool(result.hidden_states.data() + static_cast<int64_t>(begin) * hidden, count, hidden,
                                req->pooling_params, defaults_, &out.tokens[i].embedding));
    out.tokens[i].token = 0;
  }
  return {};
}

}  // namespace troupe::engine
