#include "platforms/cpu/cpu_ops.hpp"

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/quantize.hpp"
#include "troupe/dtype.hpp"

namespace troupe::cpu {

void CpuOps::matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y) {
  kernels::cpu::matmul(w.type, w.data, w.ne[0], w.rows(), x, n_tokens, y, pool_);
}

void CpuOps::embedding(const WeightTensor& w, const int32_t* ids, int64_t n, float* out) {
  const int64_t dim = w.ne[0];
  const int64_t rb = row_bytes(w.type, dim);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t t = 0; t < n; ++t) kernels::cpu::dequantize_row(w.type, base + ids[t] * rb, out + t * dim, dim);
}

void CpuOps::rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  kernels::cpu::rms_norm(x, weight, n_tokens, dim, eps, out);
}

void CpuOps::rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                  bool neox) {
  kernels::cpu::rope(x, positions, n_tokens, n_heads, head_dim, theta, neox);
}

void CpuOps::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  kernels::cpu::silu_mul(gate, up, n, out);
}

void CpuOps::add_inplace(float* y, const float* x, int64_t n) { kernels::cpu::add_inplace(y, x, n); }

}  // namespace troupe::cpu
