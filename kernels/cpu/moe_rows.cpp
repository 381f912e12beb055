#include "kernels/cpu/moe_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace troupe::kernels::cpu {

void gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * row_len, src + int64_t{rows[i]} * row_len, static_cast<size_t>(row_len) * sizeof(float));
}

void scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                      float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    float* d = dst + int64_t{rows[i]} * row_len;
    const float* s = src + i * row_len;
    const float w = weights[i];
    for (int64_t j = 0; j < row_len; ++j) d[j] += w * s[j];
  }
}

void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

}  // namespace troupe::kernels::cpu
