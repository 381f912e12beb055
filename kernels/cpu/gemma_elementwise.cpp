#include "kernels/cpu/gemma_elementwise.hpp"

#include <cmath>

#include "kernels/cpu/isa.hpp"

namespace troupe::kernels::cpu {

#if defined(TROUPE_KERNELS_HAVE_AVX2)
// elementwise_avx2.cpp: x * sigmoid(2u) with the vector exp (tanh per element was a fifth
// of Gemma 3's prefill).
void gelu_tanh_mul_avx2(const float* gate, const float* up, int64_t n, float* out);
void gelu_tanh_avx2(const float* x, int64_t n, float* out);
#define TROUPE_USE_AVX2() is_avx2(active_isa())
#else
#define TROUPE_USE_AVX2() false
#endif

namespace {

float gelu_tanh_of(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

}  // namespace

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  if (TROUPE_USE_AVX2()) return gelu_tanh_mul_avx2(gate, up, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_of(gate[i]) * up[i];
}

void gelu_tanh(const float* x, int64_t n, float* out) {
  if (TROUPE_USE_AVX2()) return gelu_tanh_avx2(x, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_of(x[i]);
}

void softcap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void scale(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace troupe::kernels::cpu
