#include "platforms/cpu/cpu_ops.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/gemma_elementwise.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/moe_ffn.hpp"
#include "kernels/cpu/moe_rows.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/cpu/token_select.hpp"
#include "troupe/dtype.hpp"
#include "troupe/named_ops/moe_ops.hpp"
#include "troupe/named_ops/named_ops.hpp"
#include "troupe/named_ops/rope_ops.hpp"
#include "troupe/quantization.hpp"

namespace troupe::cpu {
namespace {

// Below this many floats an element-wise op is cheaper than waking the pool.
constexpr int64_t kMinParallelFloats = 1 << 14;

/// Run fn(begin, end) over [0, n) items of `item_floats` floats each, split over
/// the pool when the op is big enough. Items are independent, so the result is
/// bit-identical however it is split.
template <class Fn>
void for_items(kernels::cpu::ThreadPool* pool, int64_t n, int64_t item_floats, Fn&& fn) {
  if (pool == nullptr || pool->size() < 2 || n < 2 || n * item_floats < kMinParallelFloats) {
    fn(int64_t{0}, n);
    return;
  }
  pool->parallel_for(n, [&](int64_t b, int64_t e) { fn(b, e); });
}

constexpr int64_t kChunk = 4096;  // floats per work item of the flat element-wise ops

}  // namespace

// A plugin format runs here when a plugin offered its matmul to platform cpu.
static bool plugin_format_runs_here(DType type) {
  const WeightFormat* f = weight_formats::find(type);
  return f != nullptr && !weight_formats::is_builtin(type) &&
         weight_formats::find_kernel("cpu", weight_formats::matmul_op_name(f->name)) != nullptr;
}

std::vector<std::string> weight_type_names() {
  std::vector<std::string> names;
  for (const WeightFormat* f : weight_formats::all())
    if (weight_formats::is_builtin(f->id) ? kernels::cpu::supports_type(f->id) : plugin_format_runs_here(f->id))
      names.push_back(f->name);
  return names;
}

Status CpuOps::check_weight_type(DType type) const {
  if (!weight_formats::is_builtin(type) && weight_formats::find(type) != nullptr)
    return plugin_format_runs_here(type) ? Status{} : weight_formats::no_kernel(type, "cpu");
  if (dtype_traits(static_cast<uint32_t>(type)) && kernels::cpu::supports_type(type)) return {};
  std::string list;
  for (const auto& n : weight_type_names()) list += (list.empty() ? "" : ", ") + n;
  return not_supported("weights of type " + std::string(to_string(type)) + " (id " +
                       std::to_string(static_cast<uint32_t>(type)) + ") cannot be computed by platform cpu (supported: " +
                       list + ")");
}

void CpuOps::matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y) {
  if (!weight_formats::is_builtin(w.type)) {
    // A plugin format: the kernel its plugin offered (check_weight_type vouched for it at load).
    if (WeightMatmulFn fn = weight_formats::find_matmul(*this, w.type)) fn(*this, w, x, n_tokens, y);
    return;
  }
  kernels::cpu::matmul(w.type, w.data, w.ne[0], w.rows(), x, n_tokens, y, pool_, w.row_stride);
}

void CpuOps::matmul_multi(const WeightTensor* const* ws, float* const* ys, int n, const float* x, int64_t n_tokens) {
  // The kernels take up to 4 matrices of one input width per pass.
  bool one_pass = n >= 1 && n <= 4;
  for (int j = 0; j < n && one_pass; ++j)
    one_pass = ws[j]->ne[0] == ws[0]->ne[0] && weight_formats::is_builtin(ws[j]->type);
  if (!one_pass) return Ops::matmul_multi(ws, ys, n, x, n_tokens);
  kernels::cpu::MatmulJob jobs[4];
  for (int j = 0; j < n; ++j) jobs[j] = {ws[j]->type, ws[j]->data, ws[j]->rows(), ys[j], ws[j]->row_stride};
  kernels::cpu::matmul_multi(jobs, n, ws[0]->ne[0], x, n_tokens, pool_);
}

void CpuOps::matmul_silu_mul(const WeightTensor& gate, const WeightTensor& up, const float* x, int64_t n_tokens,
                             float* out, float* scratch) {
  if (gate.ne[0] != up.ne[0] || gate.rows() != up.rows() || !weight_formats::is_builtin(gate.type) ||
      !weight_formats::is_builtin(up.type))
    return Ops::matmul_silu_mul(gate, up, x, n_tokens, out, scratch);
  kernels::cpu::matmul_silu_mul({gate.type, gate.data, gate.rows(), out, gate.row_stride},
                                {up.type, up.data, up.rows(), scratch, up.row_stride}, gate.ne[0], x, n_tokens, pool_);
}

void CpuOps::embedding(const WeightTensor& w, const int32_t* ids, int64_t n, float* out) {
  const int64_t dim = w.ne[0];
  const int64_t rb = w.row_stride > 0 ? w.row_stride : row_bytes(w.type, dim);
  const auto* base = static_cast<const uint8_t*>(w.data);
  if (!weight_formats::is_builtin(w.type)) {
    // A plugin format's rows through its reference dequantization.
    const WeightFormat* f = weight_formats::find(w.type);
    if (f == nullptr || f->dequantize_row == nullptr) return;
    for (int64_t t = 0; t < n; ++t) f->dequantize_row(base + ids[t] * rb, dim, out + t * dim);
    return;
  }
  for (int64_t t = 0; t < n; ++t) kernels::cpu::dequantize_row(w.type, base + ids[t] * rb, out + t * dim, dim);
}

void CpuOps::rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  for_items(pool_, n_tokens, dim, [&](int64_t b, int64_t e) {
    kernels::cpu::rms_norm(x + b * dim, weight, e - b, dim, eps, out + b * dim);
  });
}

void CpuOps::rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                  bool neox) {
  const int64_t row = static_cast<int64_t>(n_heads) * head_dim;
  for_items(pool_, n_tokens, row, [&](int64_t b, int64_t e) {
    kernels::cpu::rope(x + b * row, positions + b, e - b, n_heads, head_dim, theta, neox);
  });
}

void CpuOps::rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                               float theta, bool neox, const float* freq_factors, float mscale) {
  const int64_t row = static_cast<int64_t>(n_heads) * head_dim;
  for_items(pool_, n_tokens, row, [&](int64_t b, int64_t e) {
    kernels::cpu::rope_freq_factors(x + b * row, positions + b, e - b, n_heads, head_dim, theta, neox, freq_factors,
                                    mscale);
  });
}

OpFn CpuOps::find_op(std::string_view name) const {
  static const named_ops::Entry table[] = {  // not constexpr: entry() reinterpret_casts
      named_ops::entry<named_ops::RopeFreqFactors>(+[](Ops& ops, float* x, const int32_t* positions, int64_t n_tokens,
                                                       int n_heads, int head_dim, float theta, bool neox,
                                                       const float* freq_factors, float mscale) {
        static_cast<CpuOps&>(ops).rope_freq_factors(x, positions, n_tokens, n_heads, head_dim, theta, neox,
                                                    freq_factors, mscale);
      }),
      named_ops::entry<named_ops::SelectTokens>(
          +[](Ops& ops, const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params, int32_t* out) {
            return static_cast<CpuOps&>(ops).select_tokens(logits, rows, vocab, params, out);
          }),
      named_ops::entry<named_ops::GeluTanhMul>(+[](Ops& ops, const float* gate, const float* up, int64_t n, float* out) {
        static_cast<CpuOps&>(ops).split(n, [=](int64_t b, int64_t e) {
          kernels::cpu::gelu_tanh_mul(gate + b, up + b, e - b, out + b);
        });
      }),
      named_ops::entry<named_ops::GeluTanh>(+[](Ops& ops, const float* x, int64_t n, float* out) {
        static_cast<CpuOps&>(ops).split(n, [=](int64_t b, int64_t e) { kernels::cpu::gelu_tanh(x + b, e - b, out + b); });
      }),
      named_ops::entry<named_ops::SoftCap>(+[](Ops& ops, float* x, int64_t n, float cap) {
        static_cast<CpuOps&>(ops).split(n, [=](int64_t b, int64_t e) { kernels::cpu::softcap(x + b, e - b, cap); });
      }),
      named_ops::entry<named_ops::Scale>(
          +[](Ops&, float* x, int64_t n, float factor) { kernels::cpu::scale(x, n, factor); }),
      named_ops::entry<named_ops::GatherRows>(
          +[](Ops& ops, const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
            static_cast<CpuOps&>(ops).split_rows(n, row_len, [=](int64_t b, int64_t e) {
              kernels::cpu::gather_rows(src, row_len, rows + b, e - b, dst + b * row_len);
            });
          }),
      named_ops::entry<named_ops::ScatterAddRows>(+[](Ops&, const float* src, int64_t row_len, const int32_t* rows,
                                                     const float* weights, int64_t n, float* dst) {
        // In order on one thread: a row named twice must get its shares in order.
        kernels::cpu::scatter_add_rows(src, row_len, rows, weights, n, dst);
      }),
      named_ops::entry<named_ops::SwigluOai>(
          +[](Ops& ops, const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
            static_cast<CpuOps&>(ops).split(n, [=](int64_t b, int64_t e) {
              kernels::cpu::swiglu_oai(gate + b, up + b, e - b, alpha, limit, out + b);
            });
          }),
      named_ops::entry<named_ops::MoeFfn>(+[](Ops& ops, const named_ops::MoeExpertsView& experts, const float* x,
                                              int64_t n_tokens, int64_t n_embd, const named_ops::MoeAssignments& a,
                                              float* out) {
        static_cast<CpuOps&>(ops).moe_ffn(experts, x, n_tokens, n_embd, a, out);
      }),
      named_ops::entry<named_ops::ParallelFor>(
          +[](Ops& ops, int64_t n, named_ops::ParallelFor::Body body, void* ctx) {
            kernels::cpu::ThreadPool* pool = static_cast<CpuOps&>(ops).pool_;
            if (pool == nullptr || pool->size() < 2 || n < 2) return body(ctx, 0, n);
            pool->parallel_for(n, [&](int64_t b, int64_t e) { body(ctx, b, e); });
          }),
  };
  if (OpFn fn = named_ops::lookup(table, name)) return fn;
  // Kernels plugins offer to this platform (a weight format's matmul, troupe/quantization.hpp).
  return weight_formats::find_kernel("cpu", name);
}

void CpuOps::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  for_items(pool_, chunks, kChunk, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(n, e * kChunk);
    kernels::cpu::silu_mul(gate + lo, up + lo, hi - lo, out + lo);
  });
}

void CpuOps::add_inplace(float* y, const float* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  for_items(pool_, chunks, kChunk, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(n, e * kChunk);
    kernels::cpu::add_inplace(y + lo, x + lo, hi - lo);
  });
}

void CpuOps::layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim,
                        float eps, float* out) {
  for_items(pool_, n_tokens, dim, [&](int64_t b, int64_t e) {
    kernels::cpu::layer_norm(x + b * dim, weight, bias, e - b, dim, eps, out + b * dim);
  });
}

void CpuOps::gelu(const float* x, int64_t n, float* out) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  for_items(pool_, chunks, kChunk, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(n, e * kChunk);
    kernels::cpu::gelu_erf(x + lo, hi - lo, out + lo);
  });
}

void CpuOps::add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) {
  for_items(pool_, n_tokens, dim, [&](int64_t b, int64_t e) { kernels::cpu::add_bias(y + b * dim, bias, e - b, dim); });
}

void CpuOps::dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                             int num_seqs, int n_heads, int head_dim, float scale, bool causal) {
  // One work item per (sequence, head): independent, so the split never changes a bit.
  const int64_t items = static_cast<int64_t>(num_seqs) * n_heads;
  int64_t work = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int64_t len = seq_starts[s + 1] - seq_starts[s];
    work += len * len;
  }
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int s = static_cast<int>(it / n_heads), h = static_cast<int>(it % n_heads);
      kernels::cpu::dense_attention(q, k, v, out, seq_starts[s], seq_starts[s + 1], n_heads, head_dim, h, h + 1,
                                    scale, causal);
    }
  };
  if (pool_ == nullptr || pool_->size() < 2 || items < 2 || work * head_dim * n_heads < kMinParallelFloats) {
    run(0, items);
    return;
  }
  pool_->parallel_for(items, run);
}

void CpuOps::moe_ffn(const named_ops::MoeExpertsView& v, const float* x, int64_t n_tokens, int64_t n_embd,
                     const named_ops::MoeAssignments& a, float* out) {
  auto job = [](const WeightTensor& w) { return kernels::cpu::MatmulJob{w.type, w.data, w.rows(), nullptr, w.row_stride}; };
  auto bias = [](const WeightTensor* b, int32_t e) {
    return b != nullptr && b[e].data != nullptr ? static_cast<const float*>(b[e].data) : nullptr;
  };
  moe_experts_.resize(static_cast<size_t>(v.n_experts));
  for (int32_t g = 0; g < a.n_groups; ++g) {  // only the experts this step reads
    const int32_t e = a.expert[g];
    moe_experts_[static_cast<size_t>(e)] = {job(v.gate[e]),      job(v.up[e]),      job(v.down[e]),
                                            bias(v.gate_bias, e), bias(v.up_bias, e), bias(v.down_bias, e)};
  }
  kernels::cpu::MoeFfnArgs k;
  k.experts = moe_experts_.data();
  k.n_embd = n_embd;
  k.ff = v.n_experts > 0 ? v.gate[0].rows() : 0;
  k.activation = v.activation;
  k.alpha = v.alpha;
  k.limit = v.limit;
  k.n_groups = a.n_groups;
  k.expert = a.expert;
  k.begin = a.begin;
  k.rows = a.rows;
  k.weights = a.weights;
  k.x = x;
  k.n_tokens = n_tokens;
  k.out = out;
  kernels::cpu::moe_ffn(k, pool_);
}

void CpuOps::split_rows(int64_t n, int64_t row_len, const std::function<void(int64_t, int64_t)>& fn) {
  for_items(pool_, n, row_len, fn);
}

void CpuOps::split(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kMinPerThread = 1 << 14;  // elements: below that threads cost more than they give
  if (pool_ == nullptr || pool_->size() < 2 || n < 2 * kMinPerThread) return fn(0, n);
  const int64_t parts = std::min<int64_t>(pool_->size(), n / kMinPerThread);
  pool_->parallel_for(parts, [&](int64_t p0, int64_t p1) { fn(n * p0 / parts, n * p1 / parts); });
}

bool CpuOps::select_tokens(const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                           int32_t* out) {
  std::vector<float> probs;
  std::vector<int32_t> order;
  for (int64_t r = 0; r < rows; ++r) {
    const TokenSelection& s = params[r];
    out[r] = kernels::cpu::select_token(logits + r * vocab, vocab, s.temperature, s.top_p, s.min_p, s.top_k, s.u, probs,
                                        order);
  }
  return true;
}

}  // namespace troupe::cpu
