// Paged attention for one sequence (a template: the block table lookup is inlined).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim_device.hpp"

namespace sim::kernels {

inline void kv_row(const KvLayer& cache, const uint8_t* base, int64_t slot, int64_t offset, int n, float* out) {
  if (cache.f16) {
    const auto* h = reinterpret_cast<const uint16_t*>(base) + slot * cache.kv_dim + offset;
    for (int i = 0; i < n; ++i) out[i] = half_to_float(h[i]);
  } else {
    const auto* f = reinterpret_cast<const float*>(base) + slot * cache.kv_dim + offset;
    for (int i = 0; i < n; ++i) out[i] = f[i];
  }
}

template <class SlotOf>
void paged_attention_seq(const KvLayer& cache, const float* q, float* out, int64_t q_begin, int64_t q_end,
                         int64_t seq_len, int num_heads, int num_kv_heads, int head_dim, float scale,
                         int64_t window, float softcap, const float* sinks, SlotOf&& slot_of, float* scores,
                         float* key_row) {
  const int group = num_heads / num_kv_heads;  // query heads per kv head (GQA)
  const int64_t q_len = q_end - q_begin;
  for (int64_t r = q_begin; r < q_end; ++r) {
    const int64_t pos = seq_len - q_len + (r - q_begin);  // this row's position; it sees [lo, pos]
    const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int h = 0; h < num_heads; ++h) {
      const float* qh = q + (r * num_heads + h) * int64_t{head_dim};
      float* oh = out + (r * num_heads + h) * int64_t{head_dim};
      const int64_t kv_off = int64_t{h / group} * head_dim;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t p = lo; p <= pos; ++p) {
        kv_row(cache, cache.k, slot_of(p), kv_off, head_dim, key_row);
        float s = 0;
        for (int i = 0; i < head_dim; ++i) s += qh[i] * key_row[i];
        scores[p] = s * scale;
        if (softcap > 0) scores[p] = softcap * std::tanh(scores[p] / softcap);
        mx = std::max(mx, scores[p]);
      }
      double sum = 0;
      for (int64_t p = lo; p <= pos; ++p) {
        scores[p] = std::exp(scores[p] - mx);
        sum += scores[p];
      }
      if (sinks != nullptr) sum += std::exp(static_cast<double>(sinks[h]) - mx);
      const auto inv = static_cast<float>(1.0 / sum);
      for (int i = 0; i < head_dim; ++i) oh[i] = 0;
      for (int64_t p = lo; p <= pos; ++p) {
        kv_row(cache, cache.v, slot_of(p), kv_off, head_dim, key_row);
        const float w = scores[p] * inv;
        for (int i = 0; i < head_dim; ++i) oh[i] += w * key_row[i];
      }
    }
  }
}

}  // namespace sim::kernels
