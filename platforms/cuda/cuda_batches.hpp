// The batches the CUDA worker builds itself (warm-up decodes, the batch a decode
// graph is captured with, the replay-vs-eager validation batch) and the shape of
// its decode graphs. Host code only: tests feed every one of them through the
// SDK's AttentionBackend::check_batch without a GPU (cuda_batches_test), since a
// batch the worker makes for itself must pass the check every step passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "troupe/model_runner/settings.hpp"
#include "troupe/model.hpp"

namespace troupe::cuda {

/// What a self-made batch needs to know of the model and the allocated cache.
struct BatchGeometry {
  int64_t vocab = 0;       // token ids are below it
  int64_t num_blocks = 0;  // of the allocated KV cache
  int block_size = 0;      // tokens per block
};

/// A decode step of `num_seqs` one-token sequences (warm-up, and the shape a graph is
/// captured with): row i writes the first slot of block i % num_blocks at position 0 and
/// reads only that slot (seq_len 1). Rows beyond num_blocks share blocks and so write the
/// same slot; the values are never read by a real sequence, which writes its own slots
/// before reading them. Token ids spread over the vocabulary when `spread_tokens`, else 0.
ForwardBatch warm_up_decode_batch(int num_seqs, const BatchGeometry& g, bool spread_tokens = true);

/// A prefill of `tokens` tokens (max_num_batched_tokens at warm-up: every matmul at its
/// largest): sequences of up to block_size tokens, sequence j filling block j % num_blocks
/// from position 0; the last min(sequences, max_logits_rows) sequences ask for logits (no
/// step returns more rows than max_num_seqs, and the logits buffer need not either).
/// Sequences beyond num_blocks share blocks (their values are never read by a real sequence).
ForwardBatch warm_up_prefill_batch(int64_t tokens, const BatchGeometry& g, int64_t max_logits_rows);

/// The replay-vs-eager validation batch: min(num_seqs, num_blocks) rows with distinct
/// tokens, positions and blocks; each row writes the first slot of its own block and reads
/// only it, so an eager run and a replay of the same batch see the same cache.
ForwardBatch graph_validation_batch(int num_seqs, const BatchGeometry& g);

/// How far a replay's logits are from the eager step's: the first row whose largest
/// difference exceeds `tolerance` x max(1, the row's largest |logit|) (a NaN difference
/// counts as infinite), or within when none does. `want` and `got` are [rows][vocab].
struct ReplayDifference {
  bool within = true;
  int row = -1;
  float worst = 0.0f, scale = 0.0f;
};
ReplayDifference compare_logits(const std::vector<float>& want, const std::vector<float>& got, int rows,
                                int64_t vocab, float tolerance);

/// The decode graphs a worker captures: the sizes (CudaGraphRunner::capture_sizes) up to
/// min(max_num_seqs, max_num_batched_tokens, 512), and block tables `width` wide (what
/// max_model_len, else the model's context, needs, at most the cache).
struct DecodeGraphShape {
  std::vector<int> sizes;  // ascending; empty: no decode batch size to capture
  size_t width = 0;
};
DecodeGraphShape decode_graph_shape(const RunnerSettings& config, int64_t context_length, const BatchGeometry& g);

/// Bytes one step stages (CudaContext::stage) at most: ids and positions of `tokens`
/// tokens, the attention arrays of `seqs` sequences with tables `width` wide, the
/// sampling rows and a dense attention's sequence starts, each 256-aligned. A staging ring
/// this large never wraps within a step.
int64_t staging_bytes_per_step(int64_t tokens, int64_t seqs, size_t width);

/// Device memory the worker allocates after the KV cache is sized, which the KV budget must
/// leave free: the logits buffer (the most rows a step returns: max_num_seqs or a graph's
/// size), the sampling workspace for max_num_seqs rows
/// (none when rows x vocab exceeds INT_MAX: those steps sample on the host), the cuBLAS
/// activation scratch (max_num_batched_tokens x 4 x hidden in f16: the widest matmul input
/// of the usual FFN; an estimate, since weight shapes are the model's) and its 32 MiB
/// workspace, and with CUDA graphs their buffers plus the validation logits.
struct LaterAllocations {
  int64_t logits = 0, sampling = 0, cublas = 0, graphs = 0;
  int64_t total() const { return logits + sampling + cublas + graphs; }
};
LaterAllocations later_allocations(const RunnerSettings& config, const ModelInfo& info, bool graphs);

}  // namespace troupe::cuda
