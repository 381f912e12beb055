#include "platforms/cuda/cuda_batches.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/sampling.hpp"
#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_graph_runner.hpp"

namespace troupe::cuda {

namespace {

/// Appends one decode row: `token` at `position`, writing slot 0 of `block`.
void append_decode_row(ForwardBatch& b, int32_t token, int32_t position, int32_t block, int32_t block_size) {
  const auto row = static_cast<int32_t>(b.seq_lens.size());
  b.token_ids.push_back(token);
  b.positions.push_back(position);
  b.slot_mapping.push_back(int64_t{block} * block_size);
  b.seq_lens.push_back(1);
  b.block_tables.push_back({block});
  b.query_start.push_back(row + 1);
  b.logits_indices.push_back(row);
}

}  // namespace

ForwardBatch warm_up_decode_batch(int num_seqs, const BatchGeometry& g, bool spread_tokens) {
  ForwardBatch b;
  if (num_seqs <= 0 || g.vocab <= 0 || g.num_blocks <= 0 || g.block_size <= 0) return b;
  b.query_start.push_back(0);
  for (int i = 0; i < num_seqs; ++i)
    append_decode_row(b, spread_tokens ? static_cast<int32_t>((7 * int64_t{i} + 3) % g.vocab) : 0, 0,
                      static_cast<int32_t>(i % g.num_blocks), g.block_size);
  return b;
}

ForwardBatch warm_up_prefill_batch(int64_t tokens, const BatchGeometry& g, int64_t max_logits_rows) {
  ForwardBatch b;
  if (tokens <= 0 || g.vocab <= 0 || g.num_blocks <= 0 || g.block_size <= 0 || max_logits_rows <= 0) return b;
  const int64_t seqs = (tokens + g.block_size - 1) / g.block_size;
  b.query_start.push_back(0);
  for (int64_t done = 0, seq = 0; done < tokens; ++seq) {
    const auto len = static_cast<int32_t>(std::min<int64_t>(g.block_size, tokens - done));
    const auto block = static_cast<int32_t>(seq % g.num_blocks);
    for (int32_t p = 0; p < len; ++p) {
      b.token_ids.push_back(static_cast<int32_t>((done + p) * 13 % g.vocab));
      b.positions.push_back(p);
      b.slot_mapping.push_back(int64_t{block} * g.block_size + p);
    }
    done += len;
    b.query_start.push_back(static_cast<int32_t>(done));
    b.seq_lens.push_back(len);
    b.block_tables.push_back({block});
    if (seq >= seqs - max_logits_rows) b.logits_indices.push_back(static_cast<int32_t>(done - 1));
  }
  return b;
}

ForwardBatch graph_validation_batch(int num_seqs, const BatchGeometry& g) {
  ForwardBatch b;
  if (g.vocab <= 0 || g.block_size <= 0) return b;
  const int n = static_cast<int>(std::min<int64_t>(num_seqs, g.num_blocks));
  if (n <= 0) return b;
  b.query_start.push_back(0);
  // Rope sees different positions; attention reads one slot.
  for (int i = 0; i < n; ++i)
    append_decode_row(b, static_cast<int32_t>((31 * int64_t{i} + 5) % g.vocab), 5 + 3 * i, i, g.block_size);
  return b;
}

ReplayDifference compare_logits(const std::vector<float>& want, const std::vector<float>& got, int rows,
                                int64_t vocab, float tolerance) {
  ReplayDifference d;
  if (rows < 0 || vocab <= 0 || want.size() != got.size() || static_cast<int64_t>(want.size()) != rows * vocab) {
    d.within = false;
    d.worst = INFINITY;
    return d;
  }
  for (int r = 0; r < rows; ++r) {
    const float* w = want.data() + int64_t{r} * vocab;
    const float* g = got.data() + int64_t{r} * vocab;
    float scale = 1.0f, worst = 0.0f;
    for (int64_t i = 0; i < vocab; ++i) scale = std::max(scale, std::fabs(w[i]));
    for (int64_t i = 0; i < vocab; ++i) {
      const float diff = std::fabs(w[i] - g[i]);
      if (!(diff <= worst)) worst = std::isnan(diff) ? INFINITY : diff;
    }
    if (!(worst <= tolerance * scale)) {
      d = ReplayDifference{false, r, worst, scale};
      return d;
    }
    d.worst = std::max(d.worst, worst);
  }
  return d;
}

DecodeGraphShape decode_graph_shape(const RunnerSettings& config, int64_t context_length, const BatchGeometry& g) {
  DecodeGraphShape shape;
  if (g.num_blocks <= 0 || g.block_size <= 0) return shape;
  const int64_t context = config.max_model_len > 0 ? config.max_model_len : context_length;
  shape.width = static_cast<size_t>(
      context > 0 ? std::min<int64_t>((context + g.block_size - 1) / g.block_size, g.num_blocks) : g.num_blocks);
  const int64_t max_batch = std::min<int64_t>(
      {int64_t{config.max_num_seqs}, config.max_num_batched_tokens, int64_t{512}});
  shape.sizes = CudaGraphRunner::capture_sizes(static_cast<int>(std::max<int64_t>(0, max_batch)));
  return shape;
}

int64_t staging_bytes_per_step(int64_t tokens, int64_t seqs, size_t width) {
  const auto aligned = [](int64_t n) { return (n + 255) / 256 * 256; };
  const int64_t ints = tokens * static_cast<int64_t>(sizeof(int32_t));
  return 2 * aligned(ints) +
         aligned(static_cast<int64_t>(attention_inputs_layout(tokens, static_cast<int>(seqs), width).bytes)) +
         aligned(seqs * static_cast<int64_t>(sizeof(kernels::cuda::SamplingRow))) +
         aligned((seqs + 1) * static_cast<int64_t>(sizeof(int32_t)));
}

LaterAllocations later_allocations(const RunnerSettings& config, const ModelInfo& info, bool graphs) {
  LaterAllocations a;
  const int64_t vocab = std::max<int64_t>(0, info.vocab_size);
  const int64_t tokens = std::max<int64_t>(1, config.max_num_batched_tokens);
  const int64_t seqs = std::max<int64_t>(1, config.max_num_seqs);
  const int block_size = config.cache.block_size > 0 ? config.cache.block_size : 16;
  int64_t rows = seqs;
  if (graphs) {
    // The cache is not sized yet: tables as wide as the context needs.
    const DecodeGraphShape shape =
        decode_graph_shape(config, info.context_length, BatchGeometry{vocab, int64_t{1} << 40, block_size});
    if (!shape.sizes.empty()) {
      const int64_t max = shape.sizes.back();
      rows = std::max(rows, max);
      a.graphs = 2 * max * static_cast<int64_t>(sizeof(int32_t)) +                            // ids, positions
                 static_cast<int64_t>(attention_inputs_layout(max, static_cast<int>(max), shape.width).bytes) +
                 3 * max * vocab * static_cast<int64_t>(sizeof(float));  // its logits, and the two validation copies
    }
  }
  a.logits = rows * vocab * static_cast<int64_t>(sizeof(float));
  if (kernels::cuda::sampling_fits(seqs, vocab)) {
    auto bytes = kernels::cuda::sampling_workspace_bytes(seqs, vocab);
    // Without a device cub cannot size its sort scratch: the keys (two copies) are the bulk.
    a.sampling = bytes.ok() ? *bytes : 2 * seqs * vocab * static_cast<int64_t>(sizeof(uint64_t));
  }
  a.cublas = tokens * 4 * std::max<int64_t>(0, info.hidden_size) * 2 + (int64_t{32} << 20);
  return a;
}

}  // namespace troupe::cuda
