#include "sim_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "sim_device.hpp"

namespace sim::kernels {

using troupe::DType;

bool reads_weight_type(DType type) { return type == DType::f32 || type == DType::f16 || type == DType::bf16; }

int64_t row_bytes(DType type, int64_t n) { return n * (type == DType::f32 ? 4 : 2); }

void weight_row(DType type, const uint8_t* w, int64_t stride, int64_t row, int64_t n, float* out) {
  const uint8_t* r = w + row * stride;
  switch (type) {
    case DType::f32: std::memcpy(out, r, static_cast<size_t>(n) * 4); return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) out[i] = half_to_float(reinterpret_cast<const uint16_t*>(r)[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(reinterpret_cast<const uint16_t*>(r)[i]);
      return;
    default: std::abort();  // the ops refuse other types before they get here
  }
}

void matmul(DType type, const uint8_t* w, int64_t stride, int64_t in, int64_t out, const float* x, int64_t n_tokens,
            float* y) {
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    weight_row(type, w, stride, o, in, row.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * in;
      float s = 0;
      for (int64_t i = 0; i < in; ++i) s += xt[i] * row[static_cast<size_t>(i)];
      y[t * out + o] = s;
    }
  }
}

void rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double{x[t * dim + i]} * x[t * dim + i];
    const auto scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) out[t * dim + i] = x[t * dim + i] * scale * (weight ? weight[i] : 1.0f);
  }
}

void rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta, bool neox) {
  rope_freq_factors(x, positions, n_tokens, n_heads, head_dim, theta, neox, nullptr, 1.0f);
}

void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                       bool neox, const float* freq_factors, float mscale) {
  const int half = head_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      double freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      if (freq_factors != nullptr) freq /= static_cast<double>(freq_factors[i]);
      const double angle = positions[t] * freq;
      const auto c = static_cast<float>(std::cos(angle) * mscale), s = static_cast<float>(std::sin(angle) * mscale);
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * int64_t{head_dim};
        // NeoX rotates (i, i + d/2); the original layout rotates neighbours (2i, 2i + 1).
        float& a = neox ? v[i] : v[2 * i];
        float& b = neox ? v[i + half] : v[2 * i + 1];
        const float x0 = a, x1 = b;
        a = x0 * c - x1 * s;
        b = x0 * s + x1 * c;
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* r = x + t * dim;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += r[i];
    mean /= static_cast<double>(dim);
    for (int64_t i = 0; i < dim; ++i) var += (r[i] - mean) * (r[i] - mean);
    var /= static_cast<double>(dim);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i)
      out[t * dim + i] = static_cast<float>((r[i] - mean) * inv) * weight[i] + (bias ? bias[i] : 0.0f);
  }
}

void gelu(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))));
}

// Evaluated in double: the sim is the independent reference, not a copy of the CPU's float code.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (x + 0.044715 * x * x * x))) *
                                up[i]);
  }
}

void gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < row_len; ++j) dst[i * row_len + j] = src[int64_t{rows[i]} * row_len + j];
}

void scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                      float* dst) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < row_len; ++j) {
      float& d = dst[int64_t{rows[i]} * row_len + j];
      d = static_cast<float>(d + static_cast<double>(weights[i]) * src[i * row_len + j]);
    }
}

void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    out[i] = static_cast<float>(g / (1.0 + std::exp(-static_cast<double>(alpha) * g)) * (u + 1.0));
  }
}

void gelu_tanh(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    out[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (v + 0.044715 * v * v * v))));
  }
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

void scale(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

void add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < dim; ++i) y[t * dim + i] += bias[i];
}

void dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                     int num_seqs, int n_heads, int head_dim, float scale, bool causal) {
  const int64_t row = int64_t{n_heads} * head_dim;
  for (int s = 0; s < num_seqs; ++s) {
    const int64_t b = seq_starts[s], e = seq_starts[s + 1];
    std::vector<double> w(static_cast<size_t>(e - b));
    for (int64_t i = b; i < e; ++i) {
      for (int h = 0; h < n_heads; ++h) {
        const float* qi = q + i * row + h * head_dim;
        const int64_t last = causal ? i : e - 1;
        double mx = -INFINITY;
        for (int64_t j = b; j <= last; ++j) {
          const float* kj = k + j * row + h * head_dim;
          float d = 0;
          for (int c = 0; c < head_dim; ++c) d += qi[c] * kj[c];
          w[static_cast<size_t>(j - b)] = double{d} * scale;
          mx = std::max(mx, w[static_cast<size_t>(j - b)]);
        }
        double sum = 0;
        for (int64_t j = b; j <= last; ++j) sum += (w[static_cast<size_t>(j - b)] = std::exp(w[static_cast<size_t>(j - b)] - mx));
        float* o = out + i * row + h * head_dim;
        for (int c = 0; c < head_dim; ++c) {
          double acc = 0;
          for (int64_t j = b; j <= last; ++j) acc += w[static_cast<size_t>(j - b)] * v[j * row + h * head_dim + c];
          o[c] = static_cast<float>(acc / sum);
        }
      }
    }
  }
}

int32_t select_token(const float* logits, int64_t vocab, float temperature, float top_p, float min_p, int32_t top_k,
                     double u) {
  if (temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  const float peak = *std::max_element(logits, logits + vocab);
  const float inv_t = 1.0f / temperature;
  std::vector<std::pair<float, int32_t>> cand;  // (probability relative to the peak, id)
  for (int64_t i = 0; i < vocab; ++i) {
    const float p = std::exp((logits[i] - peak) * inv_t);
    if (min_p <= 0.0f || p >= min_p) cand.emplace_back(p, static_cast<int32_t>(i));
  }
  std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (top_k > 0 && static_cast<size_t>(top_k) < cand.size()) cand.resize(static_cast<size_t>(top_k));
  if (top_p < 1.0f) {
    double all = 0;
    for (const auto& c : cand) all += c.first;
    double run = 0;
    size_t n = 0;
    while (n < cand.size()) {
      run += cand[n++].first;
      if (run >= top_p * all) break;
    }
    cand.resize(n);
  }
  double total = 0;
  for (const auto& c : cand) total += c.first;
  double run = 0;
  for (const auto& c : cand) {
    run += c.first;
    if (u * total < run) return c.second;
  }
  return cand.back().second;
}

void kv_store(const KvLayer& cache, const float* k, const float* v, const int64_t* slots, int64_t n_tokens) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    for (int64_t i = 0; i < cache.kv_dim; ++i) {
      const float kv[2] = {k[t * cache.kv_dim + i], v[t * cache.kv_dim + i]};
      uint8_t* dst[2] = {cache.k, cache.v};
      for (int j = 0; j < 2; ++j) {
        if (cache.f16)
          reinterpret_cast<uint16_t*>(dst[j])[slot * cache.kv_dim + i] = float_to_half(kv[j]);
        else
          reinterpret_cast<float*>(dst[j])[slot * cache.kv_dim + i] = kv[j];
      }
    }
  }
}

}  // namespace sim::kernels
