#include "platforms/cuda/cuda_ops.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <utility>

#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/encoder.hpp"
#include "kernels/cuda/gemma_elementwise.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/moe_rows.hpp"
#include "kernels/cuda/sampling.hpp"
#include "troupe/named_ops/moe_ops.hpp"
#include "troupe/named_ops/named_ops.hpp"
#include "troupe/named_ops/rope_ops.hpp"

namespace troupe::cuda {

namespace kc = troupe::kernels::cuda;

std::vector<std::string> weight_type_names() {
  std::vector<std::string> names;
  for (uint32_t id = 0; id < 256; ++id) {
    auto tr = dtype_traits(id);
    if (tr && kc::supports_weight_type(static_cast<DType>(id))) names.emplace_back(tr->name);
  }
  return names;
}

CudaOps::CudaOps(std::shared_ptr<CudaContext> ctx) : ctx_(std::move(ctx)) {}

CudaOps::~CudaOps() {
  if (scratch_ != nullptr || sampling_workspace_ != nullptr) {
    (void)ctx_->make_current();
    if (scratch_ != nullptr) {
      (void)cudaFree(scratch_);
      ctx_->note_memory_freed(scratch_serial_);
    }
    if (sampling_workspace_ != nullptr) (void)cudaFree(sampling_workspace_);
  }
}

Status CudaOps::check_weight_type(DType type) const {
  if (dtype_traits(static_cast<uint32_t>(type)) && kc::supports_weight_type(type)) return {};
  std::string list;
  for (const auto& n : weight_type_names()) list += (list.empty() ? "" : ", ") + n;
  return not_supported("weights of type " + std::string(to_string(type)) + " (id " +
                       std::to_string(static_cast<uint32_t>(type)) +
                       ") cannot be computed by platform cuda (supported: " + list + ")");
}

Status CudaOps::reserve_scratch(int64_t bytes) {
  if (bytes <= scratch_bytes_) return {};
  if (scratch_ != nullptr) {
    (void)cudaFree(scratch_);  // waits for the work that may still read it
    ctx_->note_memory_freed(scratch_serial_);
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaMalloc(&scratch_, static_cast<size_t>(bytes)),
                                    ctx_->name() + ": cudaMalloc of the cuBLAS activation scratch"));
  scratch_bytes_ = bytes;
  scratch_serial_ = ctx_->allocation_serial();
  return {};
}

Status CudaOps::run_matmul(const WeightTensor& w, const float* x, int64_t n, float* y) {
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  const int64_t in = w.ne[0], out = w.rows();
  const bool half = w.type == DType::f16 || w.type == DType::bf16;
  if (!half || n <= kc::kGemvMaxTokens)
    return kc::matmul(w.type, w.data, w.row_stride, in, out, x, DType::f32, n, y, ctx_->stream());
  auto blas = ctx_->blas();
  if (!blas.ok()) return blas.status();
  TROUPE_RETURN_IF_ERROR(reserve_scratch(n * in * 2));
  TROUPE_RETURN_IF_ERROR(kc::convert_from_f32(x, w.type, scratch_, n * in, ctx_->stream()));
  return (*blas)->gemm(w.type, w.data, w.row_stride, in, out, scratch_, n, y, ctx_->stream());
}

void CudaOps::matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y) {
  const Status s = run_matmul(w, x, n_tokens, y);
  if (!s.ok()) ctx_->record(Status(s.code(), "matmul of '" + w.name + "': " + s.message()));
}

void CudaOps::embedding(const WeightTensor& w, const int32_t* ids, int64_t n, float* out) {
  auto staged = ctx_->stage(ids, n * static_cast<int64_t>(sizeof(int32_t)));
  if (!staged.ok()) return ctx_->record(staged.status());
  ctx_->record(kc::embedding(w.type, w.data, w.row_stride, w.ne[0], w.rows(), static_cast<const int32_t*>(*staged), n,
                             out, ctx_->stream()));
}

void CudaOps::rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  ctx_->record(ctx_->make_current());
  ctx_->record(kc::rms_norm(x, weight, n_tokens, dim, eps, out, ctx_->stream()));
}

void CudaOps::rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                   bool neox) {
  auto staged = ctx_->stage(positions, n_tokens * static_cast<int64_t>(sizeof(int32_t)));
  if (!staged.ok()) return ctx_->record(staged.status());
  ctx_->record(kc::rope(x, static_cast<const int32_t*>(*staged), n_tokens, n_heads, head_dim, theta, neox,
                        ctx_->stream()));
}

void CudaOps::rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                                float theta, bool neox, const float* freq_factors, float mscale) {
  auto staged = ctx_->stage(positions, n_tokens * static_cast<int64_t>(sizeof(int32_t)));
  if (!staged.ok()) return ctx_->record(staged.status());
  ctx_->record(kc::rope_freq_factors(x, static_cast<const int32_t*>(*staged), n_tokens, n_heads, head_dim, theta, neox,
                                     freq_factors, mscale, ctx_->stream()));
}

OpFn CudaOps::find_op(std::string_view name) const {
  static const named_ops::Entry table[] = {  // not constexpr: entry() reinterpret_casts
      named_ops::entry<named_ops::RopeFreqFactors>(+[](Ops& ops, float* x, const int32_t* positions, int64_t n_tokens,
                                                       int n_heads, int head_dim, float theta, bool neox,
                                                       const float* freq_factors, float mscale) {
        static_cast<CudaOps&>(ops).rope_freq_factors(x, positions, n_tokens, n_heads, head_dim, theta, neox,
                                                     freq_factors, mscale);
      }),
      named_ops::entry<named_ops::SelectTokens>(
          +[](Ops& ops, const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params, int32_t* out) {
            return static_cast<CudaOps&>(ops).select_tokens(logits, rows, vocab, params, out);
          }),
      named_ops::entry<named_ops::GeluTanhMul>(+[](Ops& ops, const float* gate, const float* up, int64_t n, float* out) {
        static_cast<CudaOps&>(ops).run_elementwise([=](cudaStream_t st) { return kc::gelu_tanh_mul(gate, up, n, out, st); });
      }),
      named_ops::entry<named_ops::GeluTanh>(+[](Ops& ops, const float* x, int64_t n, float* out) {
        static_cast<CudaOps&>(ops).run_elementwise([=](cudaStream_t st) { return kc::gelu_tanh(x, n, out, st); });
      }),
      named_ops::entry<named_ops::SoftCap>(+[](Ops& ops, float* x, int64_t n, float cap) {
        static_cast<CudaOps&>(ops).run_elementwise([=](cudaStream_t st) { return kc::softcap(x, n, cap, st); });
      }),
      named_ops::entry<named_ops::Scale>(+[](Ops& ops, float* x, int64_t n, float factor) {
        static_cast<CudaOps&>(ops).run_elementwise([=](cudaStream_t st) { return kc::scale(x, n, factor, st); });
      }),
      named_ops::entry<named_ops::GatherRows>(
          +[](Ops& ops, const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
            static_cast<CudaOps&>(ops).gather_rows(src, row_len, rows, n, dst);
          }),
      named_ops::entry<named_ops::ScatterAddRows>(+[](Ops& ops, const float* src, int64_t row_len, const int32_t* rows,
                                                     const float* weights, int64_t n, float* dst) {
        static_cast<CudaOps&>(ops).scatter_add_rows(src, row_len, rows, weights, n, dst);
      }),
      named_ops::entry<named_ops::SwigluOai>(
          +[](Ops& ops, const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
            static_cast<CudaOps&>(ops).run_elementwise(
                [=](cudaStream_t st) { return kc::swiglu_oai(gate, up, n, alpha, limit, out, st); });
          }),
  };
  return named_ops::lookup(table, name);
}

// The host arrays of a MoE row op staged once, then the kernel on the stream.
void CudaOps::gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst) {
  ctx_->record(ctx_->make_current());
  auto staged = ctx_->stage(rows, n * static_cast<int64_t>(sizeof(int32_t)));
  if (!staged.ok()) return ctx_->record(staged.status());
  ctx_->record(kc::gather_rows(src, row_len, static_cast<const int32_t*>(*staged), n, dst, ctx_->stream()));
}

void CudaOps::scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                               float* dst) {
  ctx_->record(ctx_->make_current());
  auto r = ctx_->stage(rows, n * static_cast<int64_t>(sizeof(int32_t)));
  if (!r.ok()) return ctx_->record(r.status());
  auto w = ctx_->stage(weights, n * static_cast<int64_t>(sizeof(float)));
  if (!w.ok()) return ctx_->record(w.status());
  ctx_->record(kc::scatter_add_rows(src, row_len, static_cast<const int32_t*>(*r), static_cast<const float*>(*w), n,
                                    dst, ctx_->stream()));
}

void CudaOps::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  ctx_->record(ctx_->make_current());
  ctx_->record(kc::silu_mul(gate, up, n, out, ctx_->stream()));
}

void CudaOps::add_inplace(float* y, const float* x, int64_t n) {
  ctx_->record(ctx_->make_current());
  ctx_->record(kc::add_inplace(y, x, n, ctx_->stream()));
}

void CudaOps::layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim,
                         float eps, float* out) {
  ctx_->record(ctx_->make_current());
  ctx_->record(kc::layer_norm(x, weight, bias, n_tokens, dim, eps, out, ctx_->stream()));
}

void CudaOps::gelu(const float* x, int64_t n, float* out) {
  ctx_->record(ctx_->make_current());
  ctx_->record(kc::gelu_erf(x, n, out, ctx_->stream()));
}

void CudaOps::add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) {
  ctx_->record(ctx_->make_current());
  ctx_->record(kc::add_bias(y, bias, n_tokens, dim, ctx_->stream()));
}

void CudaOps::dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                              int num_seqs, int n_heads, int head_dim, float scale, bool causal) {
  if (num_seqs < 0) return ctx_->record(invalid_argument("dense_attention: negative number of sequences"));
  auto staged = ctx_->stage(seq_starts, (int64_t{num_seqs} + 1) * static_cast<int64_t>(sizeof(int32_t)));
  if (!staged.ok()) return ctx_->record(staged.status());
  int64_t max_len = 0;
  for (int s = 0; s < num_seqs; ++s) max_len = std::max<int64_t>(max_len, seq_starts[s + 1] - seq_starts[s]);
  ctx_->record(kc::dense_attention(q, k, v, out, static_cast<const int32_t*>(*staged), num_seqs, seq_starts[num_seqs],
                                   n_heads, head_dim, scale, causal, max_len, ctx_->stream()));
}

Status CudaOps::run_select_tokens(const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                                  int32_t* out) {
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  if (all_greedy(params, rows)) return kc::argmax_rows(logits, rows, vocab, out, ctx_->stream());
  std::vector<kc::SamplingRow> rows_params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    kc::SamplingRow& k = rows_params[static_cast<size_t>(r)];
    k.u = params[r].u;
    k.temperature = params[r].temperature;
    k.top_p = params[r].top_p;
    k.min_p = params[r].min_p;
    k.top_k = params[r].top_k;
  }
  auto need = kc::sampling_workspace_bytes(rows, vocab);
  if (!need.ok()) return need.status();
  if (*need > sampling_workspace_bytes_) {
    if (sampling_workspace_ != nullptr) (void)cudaFree(sampling_workspace_);  // waits for work still reading it
    sampling_workspace_ = nullptr;
    sampling_workspace_bytes_ = 0;
    TROUPE_RETURN_IF_ERROR(cuda_check(cudaMalloc(&sampling_workspace_, static_cast<size_t>(*need)),
                                      ctx_->name() + ": cudaMalloc of the sampling workspace"));
    sampling_workspace_bytes_ = *need;
  }
  auto staged = ctx_->stage(rows_params.data(), rows * static_cast<int64_t>(sizeof(kc::SamplingRow)));
  if (!staged.ok()) return staged.status();
  return kc::sample_rows(logits, rows, vocab, static_cast<const kc::SamplingRow*>(*staged), out, sampling_workspace_,
                         sampling_workspace_bytes_, ctx_->stream());
}

bool all_greedy(const TokenSelection* params, int64_t rows) {
  return std::all_of(params, params + rows, [](const TokenSelection& t) {
    return !(t.temperature > 0.0f) || std::isinf(1.0f / t.temperature);
  });
}

bool selects_on_device(const TokenSelection* params, int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0 || rows > INT_MAX || vocab > INT_MAX) return false;
  return all_greedy(params, rows) || kc::sampling_fits(rows, vocab);
}

bool CudaOps::select_tokens(const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                            int32_t* out) {
  // A step too large for the device sampler is sampled on the host from its logits.
  if (!selects_on_device(params, rows, vocab)) return false;
  ctx_->record(run_select_tokens(logits, rows, vocab, params, out));
  return true;
}

}  // namespace troupe::cuda
