// Matrix multiplication against GGUF-layout weights: the heart of decode speed.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "troupe/dtype.hpp"

namespace troupe::kernels::cpu {

/// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tokens, o < out. W holds `out`
/// rows of `in` elements of `type` (GGUF layout, rows contiguous). Quantized
/// weights meet activations quantized once per call to 8 bits (integer dot
/// products per block); float weights are converted on the fly. Rows are
/// split over `pool` (nullptr: the calling thread only). in must be a whole
/// number of blocks and n_tokens >= 1 (TROUPE_CHECK). Row o starts at byte
/// o * w_row_stride of w (0: rows are contiguous, row_bytes(type, in) apart),
/// so a column slice of a wider matrix is read in place.
void matmul(DType type, const void* w, int64_t in, int64_t out, const float* x, int64_t n_tokens, float* y,
            ThreadPool* pool, int64_t w_row_stride = 0);

/// matmul on a given ISA (tests and benchmarks compare them); isa must be available.
void matmul_with_isa(Isa isa, DType type, const void* w, int64_t in, int64_t out, const float* x,
                     int64_t n_tokens, float* y, ThreadPool* pool, int64_t w_row_stride = 0);

}  // namespace troupe::kernels::cpu
