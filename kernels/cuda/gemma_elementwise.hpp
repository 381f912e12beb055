// Elementwise kernels of the Gemma family on the GPU, the CPU's formulas
// (kernels/cpu/gemma_elementwise.hpp): the tanh GELU gate, soft-capping, scaling, and
// the plain tanh GELU (GPT-2's MLP).
#pragma once

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// out = gelu_tanh(gate) * up elementwise (out may alias gate or up).
Status gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
/// out = gelu_tanh(x) elementwise (out may alias x).
Status gelu_tanh(const float* x, int64_t n, float* out, cudaStream_t stream);
/// x = cap * tanh(x / cap) in place; cap > 0.
Status softcap(float* x, int64_t n, float cap, cudaStream_t stream);
/// x *= factor in place.
Status scale(float* x, int64_t n, float factor, cudaStream_t stream);

}  // namespace troupe::kernels::cuda
