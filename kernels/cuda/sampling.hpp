// Token selection on the GPU, so only token ids come back to the host.
//
// Covered here: greedy (argmax) and temperature / min_p / top_k / top_p
// sampling. Not covered: penalties (repetition, presence, frequency) and
// logprobs; for a row that needs them the caller copies its logits out
// (cudaMemcpyAsync of vocab floats) and uses the CPU sampler
// (runtime/rank/sampling), which is what the reference semantics are.
#pragma once

#include <climits>

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// out[r] = the index of the largest logits[r][i] (the first one on ties, as
/// the CPU sampler), for rows r < rows. logits [rows][vocab] f32, out int32.
Status argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream);

/// Per-row sampling parameters (a device array of `rows` of them).
struct SamplingRow {
  double u = 0.0;           // uniform in [0, 1): the step's random draw, made on the host
  float temperature = 1.0f; // <= 0, or so small that 1/temperature overflows: greedy (argmax, first index on ties)
  float top_p = 1.0f;       // in (0, 1]; 1 disables
  float min_p = 0.0f;       // in [0, 1]; 0 disables
  int32_t top_k = 0;        // <= 0 disables
};

/// Whether sample_rows takes rows x vocab: both positive and rows * vocab at most INT_MAX
/// (cub's segmented sort counts items in int). Larger steps are the caller's to sample on
/// the host.
inline bool sampling_fits(int64_t rows, int64_t vocab) {
  return rows > 0 && vocab > 0 && rows <= INT_MAX && vocab <= INT_MAX && rows * vocab <= INT_MAX;
}

/// Bytes of device workspace sample_rows needs for rows x vocab (includes
/// cub's sort scratch), or invalid_argument when rows * vocab exceeds INT_MAX.
Result<int64_t> sampling_workspace_bytes(int64_t rows, int64_t vocab);

/// One token per row, with the CPU sampler's filtering semantics:
/// p_i = exp((logit_i - max) / temperature) (unnormalised, max is 1); drop
/// p_i < min_p; keep the top_k largest; sort by p descending (ties: lower index
/// first) and keep the shortest prefix whose mass reaches top_p * its total;
/// then walk that order and return the first token whose running mass exceeds
/// u * total. (The CPU sampler walks index order when top_p is 1: the same
/// distribution, a different token for the same u.) Sums are in double.
/// workspace: at least sampling_workspace_bytes(rows, vocab) bytes, 256-byte aligned.
Status sample_rows(const float* logits, int64_t rows, int64_t vocab, const SamplingRow* params, int32_t* out,
                   void* workspace, int64_t workspace_bytes, cudaStream_t stream);

}  // namespace troupe::kernels::cuda
