// troupe::Ops on a CUDA device: the kernels of kernels/cuda, enqueued on the
// device's stream (CudaContext). Float pointers and weights are device memory
// (CudaAllocator); token ids and positions are host memory, staged by the
// context. Ops methods return nothing: a failure (bad shape, launch error,
// an op with no CUDA kernel) is recorded in the context and the worker fails
// the step with it (CudaWorker::execute_model).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "platforms/cuda/cuda_context.hpp"
#include "troupe/ops.hpp"

namespace troupe::cuda {

/// Names of the weight types the CUDA kernels compute, in ggml id order.
std::vector<std::string> weight_type_names();

/// Every row greedy: temperature <= 0, or so small that 1/temperature overflows.
bool all_greedy(const TokenSelection* params, int64_t rows);
/// Whether CudaOps::select_tokens chooses these rows on the device: argmax when every row is
/// greedy, else sample_rows when rows x vocab fits it (kernels::cuda::sampling_fits).
/// Otherwise select_tokens returns false and the worker samples from the logits on the host.
bool selects_on_device(const TokenSelection* params, int64_t rows, int64_t vocab);

class CudaOps final : public Ops {
 public:
  explicit CudaOps(std::shared_ptr<CudaContext> ctx);
  ~CudaOps() override;
  Status check_weight_type(DType type) const override;
  /// Quantized and f32 weights: the dequantizing GEMV (<= 8 tokens) or tiled GEMM. f16 and
  /// bf16 weights with more than 8 tokens: cuBLAS on activations converted to the weight type.
  void matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y) override;
  void embedding(const WeightTensor& w, const int32_t* ids, int64_t n, float* out) override;
  void rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) override;
  void rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
            bool neox) override;
  void silu_mul(const float* gate, const float* up, int64_t n, float* out) override;
  void add_inplace(float* y, const float* x, int64_t n) override;
  void layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim, float eps,
                  float* out) override;
  void gelu(const float* x, int64_t n, float* out) override;
  void add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) override;
  void dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                       int num_seqs, int n_heads, int head_dim, float scale, bool causal) override;
  /// argmax_rows when every row is greedy, else sample_rows (kernels/cuda/sampling) with the
  /// rows' parameters staged; its workspace grows with rows x vocab and is kept. False (the
  /// host samples) when selects_on_device says no: rows x vocab beyond INT_MAX.
  bool select_tokens(const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                     int32_t* out);
  /// Offers select_tokens (named_ops::SelectTokens), rope_freq_factors (named_ops::RopeFreqFactors) and Gemma's
  /// gelu_tanh_mul, softcap and scale, GPT-2's gelu_tanh, and the MoE row ops (gather_rows,
  /// scatter_add_rows, swiglu_oai).
  OpFn find_op(std::string_view name) const override;
  void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                         bool neox, const float* freq_factors, float mscale);
  /// The MoE row ops; rows and weights are host memory, staged.
  void gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst);
  void scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                        float* dst);
  /// Runs one kernel launcher on this context's stream, recording its failure.
  template <class Launch>
  void run_elementwise(Launch&& launch) {
    ctx_->record(ctx_->make_current());
    ctx_->record(launch(ctx_->stream()));
  }

  CudaContext& context() const { return *ctx_; }

 private:
  Status run_matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y);
  Status reserve_scratch(int64_t bytes);
  Status run_select_tokens(const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                           int32_t* out);

  std::shared_ptr<CudaContext> ctx_;
  void* scratch_ = nullptr;  // activations converted to f16/bf16 for cuBLAS
  int64_t scratch_bytes_ = 0;
  uint64_t scratch_serial_ = 0;  // CudaContext::allocation_serial of scratch_
  void* sampling_workspace_ = nullptr;  // sample_rows' keys and cub's sort scratch
  int64_t sampling_workspace_bytes_ = 0;
};

}  // namespace troupe::cuda
