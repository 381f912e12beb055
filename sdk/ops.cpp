#include "troupe/ops.hpp"

namespace troupe {

void Ops::matmul_multi(const WeightTensor* const* ws, float* const* ys, int n, const float* x, int64_t n_tokens) {
  for (int j = 0; j < n; ++j) matmul(*ws[j], x, n_tokens, ys[j]);
}

void Ops::matmul_silu_mul(const WeightTensor& gate, const WeightTensor& up, const float* x, int64_t n_tokens,
                          float* out, float* scratch) {
  matmul(gate, x, n_tokens, out);
  matmul(up, x, n_tokens, scratch);
  silu_mul(out, scratch, n_tokens * gate.rows(), out);
}

OpFn Ops::find_op(std::string_view) const { return nullptr; }

OpFn Ops::find_op(std::string_view) const { return nullptr; }

}  // namespace troupe
