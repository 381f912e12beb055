// troupe::Ops on the CPU: the kernels of kernels/cpu over a shared thread pool.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/moe_ffn.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "troupe/named_ops/moe_ops.hpp"
#include "troupe/ops.hpp"

namespace troupe::cpu {

/// Names of the weight types the CPU computes: the built-in types its kernels read
/// (kernels::cpu::supports_type), in ggml id order, then the plugin formats a plugin gave it a matmul for.
std::vector<std::string> weight_type_names();

class CpuOps final : public Ops {
 public:
  /// `pool` must outlive this object; nullptr runs single-threaded.
  explicit CpuOps(kernels::cpu::ThreadPool* pool) : pool_(pool) {}
  Status check_weight_type(DType type) const override;
  void matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y) override;
  /// One pass of the kernels (activations quantized once, one synchronization of the pool).
  void matmul_multi(const WeightTensor* const* ws, float* const* ys, int n, const float* x,
                    int64_t n_tokens) override;
  void matmul_silu_mul(const WeightTensor& gate, const WeightTensor& up, const float* x, int64_t n_tokens, float* out,
                       float* scratch) override;
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
  /// The reference of TokenSelection's semantics (kernels/cpu/token_select). The worker never
  /// needs it here (the host sampler reads the logits in place); platform-check compares
  /// device platforms with it.
  bool select_tokens(const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                     int32_t* out);
  /// Offers select_tokens (named_ops::SelectTokens), rope_freq_factors (named_ops::RopeFreqFactors), Gemma's
  /// gelu_tanh_mul, softcap and scale, GPT-2's gelu_tanh, the MoE row ops (gather_rows,
  /// scatter_add_rows, swiglu_oai) and the whole experts of a layer (moe_ffn), parallel_for (its pool), and the kernels plugins
  /// registered for platform cpu (a weight format's matmul.<format>.v1, troupe/quantization.hpp).
  OpFn find_op(std::string_view name) const override;
  void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                         bool neox, const float* freq_factors, float mscale);
  /// fn over [0, n) in contiguous parts on the pool (one call when n is small).
  void split(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  /// A MoE layer's experts in one call (named_ops::MoeFfn, kernels/cpu/moe_ffn.hpp).
  void moe_ffn(const named_ops::MoeExpertsView& experts, const float* x, int64_t n_tokens, int64_t n_embd,
               const named_ops::MoeAssignments& assignments, float* out);
  /// fn over n independent rows of row_len floats, split over the pool when they are many.
  void split_rows(int64_t n, int64_t row_len, const std::function<void(int64_t, int64_t)>& fn);

 private:
  kernels::cpu::ThreadPool* pool_;
  std::vector<kernels::cpu::MoeExpertMatrices> moe_experts_;  // moe_ffn's views, reused from call to call
};

}  // namespace troupe::cpu
