// The sim accelerator's Ops: every float pointer and weight is device memory,
// translated to the device's real bytes before the kernel runs; the small
// integer arrays (ids, positions, sequence starts) are host memory. matmul_multi
// and matmul_silu_mul are the SDK's defaults (built from matmul and silu_mul).
// It offers select_tokens, so a step's sampled tokens leave it as ids, RoPE with frequency
// factors (Llama 3.x's rope_freqs) and Gemma's named ops (gelu_tanh_mul, softcap, scale,
// evaluated in double as an independent reference).
#pragma once

#include "sim_device.hpp"
#include "troupe/ops.hpp"

namespace sim {

class SimOps final : public troupe::Ops {
 public:
  explicit SimOps(SimDevice& device) : d_(device) {}
  troupe::Status check_weight_type(troupe::DType type) const override;
  void matmul(const troupe::WeightTensor& w, const float* x, int64_t n_tokens, float* y) override;
  void embedding(const troupe::WeightTensor& w, const int32_t* ids, int64_t n, float* out) override;
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
  /// Token selection on the device (only ids come back): params are host memory.
  bool select_tokens(const float* logits, int64_t rows, int64_t vocab, const troupe::TokenSelection* params,
                     int32_t* out);
  /// RoPE with frequency factors (named_ops::RopeFreqFactors); freq_factors is device memory.
  void rope_freq_factors(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim, float theta,
                         bool neox, const float* freq_factors, float mscale);
  /// Gemma's elementwise ops (named_ops GeluTanhMul, SoftCap, Scale).
  void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
  void softcap(float* x, int64_t n, float cap);
  void scale(float* x, int64_t n, float factor);
  /// GPT-2's MLP activation (named_ops::GeluTanh).
  void gelu_tanh(const float* x, int64_t n, float* out);
  /// The mixture-of-experts row ops (named_ops GatherRows, ScatterAddRows, SwigluOai); rows and
  /// weights are host memory.
  void gather_rows(const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst);
  void scatter_add_rows(const float* src, int64_t row_len, const int32_t* rows, const float* weights, int64_t n,
                        float* dst);
  void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
  /// Offers select_tokens (named_ops::SelectTokens), rope_freq_factors, Gemma's gelu_tanh_mul,
  /// softcap, scale, GPT-2's gelu_tanh, and the MoE row ops.
  troupe::OpFn find_op(std::string_view name) const override;

 private:
  /// The real bytes of weight `w` (all its rows), aborting on memory that is not the device's.
  const uint8_t* weight_bytes(const troupe::WeightTensor& w, int64_t* stride, const char* op) const;
  SimDevice& d_;
};

}  // namespace sim
