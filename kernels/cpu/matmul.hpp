// Matrix multiplication against GGUF-layout weights: the heart of decode speed.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "troupe/dtype.hpp"

namespace troupe::kernels::cpu {

/// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tokens, o < out. W holds `out`
/// rows of `in` elements of `type` (GGUF layout, rows contiguous). Quantized
/// weights meet activations quantized once per call (8 bits per 32-element block
/// for Q4_0, Q5_0 and IQ4_NL, 16 bits for Q4_1, Q5_1 and Q8_0, 8 bits per super-block
/// for K-quants; integer dot products per block); float weights are converted on the fly. Rows are
/// split over `pool` (nullptr: the calling thread only). in must be a whole
/// number of blocks and n_tokens >= 1 (TROUPE_CHECK). Row o starts at byte
/// o * w_row_stride of w (0: rows are contiguous, row_bytes(type, in) apart),
/// so a column slice of a wider matrix is read in place.
void matmul(DType type, const void* w, int64_t in, int64_t out, const float* x, int64_t n_tokens, float* y,
            ThreadPool* pool, int64_t w_row_stride = 0);

/// One matrix of a matmul_multi / matmul_silu_mul pass: `out` rows of `type`
/// (row o at byte o * w_row_stride of w; 0: contiguous), results to y[n_tokens][out].
struct MatmulJob {
  DType type;
  const void* w;
  int64_t out;
  float* y;
  int64_t w_row_stride = 0;
};

/// Up to 4 matmuls that read the same x[n_tokens][in] (q, k and v) in one
/// parallel pass: x is quantized once per activation format and the rows of
/// all matrices are split over the pool together, so the pass synchronizes the
/// threads once. Each y is bit-identical to matmul() of that matrix alone.
void matmul_multi(const MatmulJob* jobs, int n_jobs, int64_t in, const float* x, int64_t n_tokens,
                  ThreadPool* pool);

/// SwiGLU's first half in one parallel pass: gate.y = silu(x W_gate^T) * (x W_up^T),
/// up.y is scratch; gate.out == up.out. Bit-identical to two matmuls and silu_mul.
void matmul_silu_mul(const MatmulJob& gate, const MatmulJob& up, int64_t in, const float* x, int64_t n_tokens,
                     ThreadPool* pool);

/// matmul, matmul_multi and matmul_silu_mul on a given ISA (tests and benchmarks compare them); isa must be available.
void matmul_with_isa(Isa isa, DType type, const void* w, int64_t in, int64_t out, const float* x,
                     int64_t n_tokens, float* y, ThreadPool* pool, int64_t w_row_stride = 0);
void matmul_multi_with_isa(Isa isa, const MatmulJob* jobs, int n_jobs, int64_t in, const float* x,
                           int64_t n_tokens, ThreadPool* pool);
void matmul_silu_mul_with_isa(Isa isa, const MatmulJob& gate, const MatmulJob& up, int64_t in, const float* x,
                              int64_t n_tokens, ThreadPool* pool);

}  // namespace troupe::kernels::cpu
