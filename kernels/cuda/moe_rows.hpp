// The mixture-of-experts row kernels (troupe/named_ops/moe_ops.hpp): an expert's tokens
// gathered, each token's weighted share scattered back, gpt-oss's clamped SwiGLU. rows and
// weights are device arrays here (the platform stages the host arrays).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "troupe/status.hpp"

namespace troupe::kernels::cuda {

/// dst[i] = src[rows[i]] for i < n, rows of row_len floats.
Status gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream);
/// dst[rows[i]] += weights[i] * src[i] for i = 0 .. n-1 in order: one thread per column walks the rows.
Status scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                        float* dst, cudaStream_t stream);
/// out = min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1) elementwise.
Status swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out,
                  cudaStream_t stream);

}  // namespace troupe::kernels::cuda
