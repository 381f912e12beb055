#include "sim_ops.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim_kernels.hpp"
#include "sim_memory.hpp"
#include "troupe/named_ops/moe_ops.hpp"
#include "troupe/named_ops/named_ops.hpp"
#include "troupe/named_ops/rope_ops.hpp"

namespace sim {

using troupe::DType;

troupe::Status SimOps::check_weight_type(DType type) const {
  if (kernels::reads_weight_type(type)) return {};
  return troupe::not_supported("weights of type " + std::string(troupe::to_string(type)) +
                               " cannot be computed by platform sim (supported: f32, f16, bf16)");
}

const uint8_t* SimOps::weight_bytes(const troupe::WeightTensor& w, int64_t* stride, const char* op) const {
  if (!kernels::reads_weight_type(w.type)) {
    std::fprintf(stderr, "sim accelerator: op %s: weight '%s' has type %s, which it cannot read\n", op,
                 w.name.c_str(), std::string(troupe::to_string(w.type)).c_str());
    std::abort();
  }
  const int64_t packed = kernels::row_bytes(w.type, w.ne[0]);
  *stride = w.row_stride > 0 ? w.row_stride : packed;
  const int64_t rows = w.rows();
  return d_.must_map(w.data, rows > 0 ? (rows - 1) * *stride + packed : 0, op);
}

void SimOps::matmul(const troupe::WeightTensor& w, const float* x, int64_t n_tokens, float* y) {
  int64_t stride = 0;
  const uint8_t* wb = weight_bytes(w, &stride, "matmul");
  const int64_t in = w.ne[0], out = w.rows();
  float* yr = dev_f32(d_, y, n_tokens * out, "matmul");
  kernels::matmul(w.type, wb, stride, in, out, dev_f32(d_, x, n_tokens * in, "matmul"), n_tokens, yr);
  maybe_break("matmul", yr, n_tokens * out);
}

void SimOps::embedding(const troupe::WeightTensor& w, const int32_t* ids, int64_t n, float* out) {
  int64_t stride = 0;
  const uint8_t* wb = weight_bytes(w, &stride, "embedding");
  const int64_t dim = w.ne[0];
  float* o = dev_f32(d_, out, n * dim, "embedding");
  for (int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= w.rows()) {
      std::fprintf(stderr, "sim accelerator: op embedding: id %d outside %lld rows\n", ids[t],
                   static_cast<long long>(w.rows()));
      std::abort();
    }
    kernels::weight_row(w.type, wb, stride, ids[t], dim, o + t * dim);
  }
  maybe_break("embedding", o, n * dim);
}

void SimOps::rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  float* o = dev_f32(d_, out, n_tokens * dim, "rms_norm");
  kernels::rms_norm(dev_f32(d_, x, n_tokens * dim, "rms_norm"), weight ? dev_f32(d_, weight, dim, "rms_norm") : nullptr,
                    n_tokens, dim, eps, o);
  maybe_break("rms_norm", o, n_tokens * dim);
}

void SimOps::rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                  bool neox) {
  const int64_t n = n_tokens * n_heads * head_dim;
  float* xr = dev_f32(d_, x, n, "rope");
  kernels::rope(xr, positions, n_tokens, n_heads, head_dim, theta, neox);
  maybe_break("rope", xr, n);
}

void SimOps::rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                               float theta, bool neox, const float* freq_factors, float mscale) {
  const int64_t n = n_tokens * n_heads * head_dim;
  float* xr = dev_f32(d_, x, n, "rope_freq_factors");
  const float* f = freq_factors ? dev_f32(d_, freq_factors, head_dim / 2, "rope_freq_factors") : nullptr;
  kernels::rope_freq_factors(xr, positions, n_tokens, n_heads, head_dim, theta, neox, f, mscale);
  maybe_break("rope_freq_factors", xr, n);
}

void SimOps::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  float* o = dev_f32(d_, out, n, "silu_mul");
  kernels::silu_mul(dev_f32(d_, gate, n, "silu_mul"), dev_f32(d_, up, n, "silu_mul"), n, o);
  maybe_break("silu_mul", o, n);
}

void SimOps::gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
  if (n <= 0) return;
  int32_t last = 0;
  for (int64_t i = 0; i < n; ++i) last = std::max(last, rows[i]);
  float* o = dev_f32(d_, dst, n * row_len, "gather_rows");
  kernels::gather_rows(dev_f32(d_, src, (int64_t{last} + 1) * row_len, "gather_rows"), row_len, rows, n, o);
  maybe_break("gather_rows", o, n * row_len);
}

void SimOps::scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                              float* dst) {
  if (n <= 0) return;
  int32_t last = 0;
  for (int64_t i = 0; i < n; ++i) last = std::max(last, rows[i]);
  float* o = dev_f32(d_, dst, (int64_t{last} + 1) * row_len, "scatter_add_rows");
  kernels::scatter_add_rows(dev_f32(d_, src, n * row_len, "scatter_add_rows"), row_len, rows, weights, n, o);
  maybe_break("scatter_add_rows", o, (int64_t{last} + 1) * row_len);
}

void SimOps::swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  float* o = dev_f32(d_, out, n, "swiglu_oai");
  kernels::swiglu_oai(dev_f32(d_, gate, n, "swiglu_oai"), dev_f32(d_, up, n, "swiglu_oai"), n, alpha, limit, o);
  maybe_break("swiglu_oai", o, n);
}

void SimOps::gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  float* o = dev_f32(d_, out, n, "gelu_tanh_mul");
  kernels::gelu_tanh_mul(dev_f32(d_, gate, n, "gelu_tanh_mul"), dev_f32(d_, up, n, "gelu_tanh_mul"), n, o);
  maybe_break("gelu_tanh_mul", o, n);
}

void SimOps::gelu_tanh(const float* x, int64_t n, float* out) {
  float* o = dev_f32(d_, out, n, "gelu_tanh");
  kernels::gelu_tanh(dev_f32(d_, x, n, "gelu_tanh"), n, o);
  maybe_break("gelu_tanh", o, n);
}

void SimOps::softcap(float* x, int64_t n, float cap) {
  float* xr = dev_f32(d_, x, n, "softcap");
  kernels::softcap(xr, n, cap);
  maybe_break("softcap", xr, n);
}

void SimOps::scale(float* x, int64_t n, float factor) {
  float* xr = dev_f32(d_, x, n, "scale");
  kernels::scale(xr, n, factor);
  maybe_break("scale", xr, n);
}

void SimOps::add_inplace(float* y, const float* x, int64_t n) {
  float* yr = dev_f32(d_, y, n, "add_inplace");
  kernels::add_inplace(yr, dev_f32(d_, x, n, "add_inplace"), n);
  maybe_break("add_inplace", yr, n);
}

void SimOps::layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                        float* out) {
  float* o = dev_f32(d_, out, n_tokens * dim, "layer_norm");
  kernels::layer_norm(dev_f32(d_, x, n_tokens * dim, "layer_norm"), dev_f32(d_, weight, dim, "layer_norm"),
                      bias ? dev_f32(d_, bias, dim, "layer_norm") : nullptr, n_tokens, dim, eps, o);
  maybe_break("layer_norm", o, n_tokens * dim);
}

void SimOps::gelu(const float* x, int64_t n, float* out) {
  float* o = dev_f32(d_, out, n, "gelu");
  kernels::gelu(dev_f32(d_, x, n, "gelu"), n, o);
  maybe_break("gelu", o, n);
}

void SimOps::add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) {
  float* yr = dev_f32(d_, y, n_tokens * dim, "add_bias");
  kernels::add_bias(yr, dev_f32(d_, bias, dim, "add_bias"), n_tokens, dim);
  maybe_break("add_bias", yr, n_tokens * dim);
}

void SimOps::dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                             int num_seqs, int n_heads, int head_dim, float scale, bool causal) {
  const int64_t n = int64_t{seq_starts[num_seqs]} * n_heads * head_dim;
  float* o = dev_f32(d_, out, n, "dense_attention");
  kernels::dense_attention(dev_f32(d_, q, n, "dense_attention"), dev_f32(d_, k, n, "dense_attention"),
                           dev_f32(d_, v, n, "dense_attention"), o, seq_starts, num_seqs, n_heads, head_dim, scale,
                           causal);
  maybe_break("dense_attention", o, n);
}

troupe::OpFn SimOps::find_op(std::string_view name) const {
  static const troupe::named_ops::Entry table[] = {
      troupe::named_ops::entry<troupe::named_ops::RopeFreqFactors>(
          +[](troupe::Ops& ops, float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
              float theta, bool neox, const float* freq_factors, float mscale) {
            static_cast<SimOps&>(ops).rope_freq_factors(x, positions, n_tokens, n_heads, head_dim, theta, neox,
                                                        freq_factors, mscale);
          }),
      troupe::named_ops::entry<troupe::named_ops::SelectTokens>(
          +[](troupe::Ops& ops, const float* logits, int64_t rows, int64_t vocab, const troupe::TokenSelection* params, int32_t* out) {
            return static_cast<SimOps&>(ops).select_tokens(logits, rows, vocab, params, out);
          }),
      troupe::named_ops::entry<troupe::named_ops::GeluTanhMul>(
          +[](troupe::Ops& ops, const float* gate, const float* up, int64_t n, float* out) {
            static_cast<SimOps&>(ops).gelu_tanh_mul(gate, up, n, out);
          }),
      troupe::named_ops::entry<troupe::named_ops::GeluTanh>(+[](troupe::Ops& ops, const float* x, int64_t n, float* out) {
        static_cast<SimOps&>(ops).gelu_tanh(x, n, out);
      }),
      troupe::named_ops::entry<troupe::named_ops::SoftCap>(+[](troupe::Ops& ops, float* x, int64_t n, float cap) {
        static_cast<SimOps&>(ops).softcap(x, n, cap);
      }),
      troupe::named_ops::entry<troupe::named_ops::Scale>(+[](troupe::Ops& ops, float* x, int64_t n, float factor) {
        static_cast<SimOps&>(ops).scale(x, n, factor);
      }),
      troupe::named_ops::entry<troupe::named_ops::GatherRows>(
          +[](troupe::Ops& ops, const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
            static_cast<SimOps&>(ops).gather_rows(src, row_len, rows, n, dst);
          }),
      troupe::named_ops::entry<troupe::named_ops::ScatterAddRows>(
          +[](troupe::Ops& ops, const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
              float* dst) { static_cast<SimOps&>(ops).scatter_add_rows(src, row_len, rows, weights, n, dst); }),
      troupe::named_ops::entry<troupe::named_ops::SwigluOai>(
          +[](troupe::Ops& ops, const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
            static_cast<SimOps&>(ops).swiglu_oai(gate, up, n, alpha, limit, out);
          }),
  };
  return troupe::named_ops::lookup(table, name);
}

bool SimOps::select_tokens(const float* logits, int64_t rows, int64_t vocab, const troupe::TokenSelection* params,
                           int32_t* out) {
  const float* l = dev_f32(d_, logits, rows * vocab, "select_tokens");
  auto* ids = reinterpret_cast<int32_t*>(d_.must_map(out, rows * int64_t{sizeof(int32_t)}, "select_tokens"));
  const bool broken = broken_op() == "select_tokens";
  for (int64_t r = 0; r < rows; ++r) {
    const troupe::TokenSelection& s = params[r];
    ids[r] = kernels::select_token(l + r * vocab, vocab, s.temperature, s.top_p, s.min_p, s.top_k, s.u);
    if (broken) ids[r] = static_cast<int32_t>((ids[r] + 1) % vocab);  // SIM_ACCEL_BREAK_OP: the wrong token
  }
  return true;
}

}  // namespace sim
