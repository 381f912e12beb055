// Elementwise kernels of the Gemma family (named ops gelu_tanh_mul.v1, softcap.v1,
// scale.v1): the tanh GELU gate, soft-capping and scaling; and the plain tanh GELU
// (gelu_tanh.v1, GPT-2's MLP).
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

/// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
/// out may alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

/// out[i] = gelu_tanh(x[i]), the formula above; out may alias x.
void gelu_tanh(const float* x, int64_t n, float* out);

/// x[i] = cap * tanh(x[i] / cap), in place (cap > 0).
void softcap(float* x, int64_t n, float cap);

/// x[i] *= factor, in place.
void scale(float* x, int64_t n, float factor);

}  // namespace troupe::kernels::cpu
