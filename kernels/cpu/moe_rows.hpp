// Row kernels of the mixture-of-experts layers (named ops gather_rows.v1,
// scatter_add_rows.v1, swiglu_oai.v1): an expert's tokens gathered into one block,
// its weighted output added back to each token's row, and gpt-oss's clamped SwiGLU.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

/// dst[i] = src[rows[i]] for i < n (rows of row_len floats).
void gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst);

/// dst[rows[i]] += weights[i] * src[i] for i = 0 .. n-1 in order (rows of row_len floats).
void scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                      float* dst);

/// out[i] = g / (1 + exp(-alpha g)) * (u + 1), g = min(gate[i], limit), u = clamp(up[i], -limit, limit)
/// (ggml_swiglu_oai); out may alias gate or up.
void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);

}  // namespace troupe::kernels::cpu
