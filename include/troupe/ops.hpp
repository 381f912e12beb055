// Compute kernels a platform provides to model definitions. Float pointers and
// weights are device memory of the platform's DeviceAllocator (host memory on
// the CPU platform); the small integer arrays of a step (token ids, positions,
// sequence starts) are host memory, which a device platform stages itself.
#pragma once

#include <cstdint>
#include <string_view>

#include "troupe/dtype.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// How one row's token is chosen on the device (Ops::select_tokens): with
/// temperature 0, the largest logit (the lowest id on ties); otherwise
/// p_i = exp((logit_i - max) / temperature) (unnormalised, max is 1), tokens with
/// p_i < min_p dropped, the top_k largest kept (top_k <= 0: all), sorted by p
/// descending (ties: lower id first), cut to the shortest prefix whose mass reaches
/// top_p times its total, then the first token in that order whose running mass
/// exceeds u times the kept total. That is the CPU sampler's draw whenever top_p < 1;
/// with top_p 1 the CPU walks ids in another order: the same distribution, another
/// token for the same u. Penalties and logprobs are not covered: rows needing them
/// are sampled on the host from copied-out logits.
struct TokenSelection {
  float temperature = 0.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = 0;
  double u = 0.0;  // the step's uniform draw in [0, 1), made on the host
};

/// An optional op's implementation as Ops::find_op returns it: a function pointer of the
/// signature troupe/named_ops/named_ops.hpp gives for that name, cast to this type.
using OpFn = void (*)();

class Ops {
 public:
  virtual ~Ops() = default;
  /// ok when matmul() and embedding() can read weights of `type`; otherwise not_supported
  /// naming the type and the platform. Models ask before they keep a weight, so a type the
  /// kernels cannot run is an error at load time, never a crash in the first step.
  virtual Status check_weight_type(DType type) const = 0;
  /// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tokens; W is ne = {in, out} of any supported type.
  virtual void matmul(const WeightTensor& w, const float* x, int64_t n_tokens, float* y) = 0;
  /// ys[j] = x W_j^T for n (1..4) weights that read the same x[n_tokens][in] (q, k and v):
  /// each exactly what matmul(*ws[j], x, n_tokens, ys[j]) gives. A platform may run them
  /// as one pass (x prepared once, one synchronization); the default calls matmul() per weight.
  virtual void matmul_multi(const WeightTensor* const* ws, float* const* ys, int n, const float* x,
                            int64_t n_tokens);
  /// out = silu(x W_gate^T) * (x W_up^T), SwiGLU's first half ([n_tokens][rows], gate and up
  /// of equal shape); `scratch` (like out) may be overwritten. Exactly what two matmul() calls
  /// and silu_mul() give; the default does that.
  virtual void matmul_silu_mul(const WeightTensor& gate, const WeightTensor& up, const float* x, int64_t n_tokens,
                               float* out, float* scratch);
  /// out[t] = row ids[t] of W (ne = {dim, rows}) converted to f32.
  virtual void embedding(const WeightTensor& w, const int32_t* ids, int64_t n, float* out) = 0;
  /// out = x / rms(x) * weight, per row of `dim`.
  virtual void rms_norm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps,
                        float* out) = 0;
  /// Rotary embedding in place on [n_tokens][n_heads][head_dim]; neox pairs (i, i+d/2), else (2i, 2i+1).
  virtual void rope(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                    float theta, bool neox) = 0;
  /// out[i] = silu(gate[i]) * up[i].
  virtual void silu_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
  /// y[i] += x[i].
  virtual void add_inplace(float* y, const float* x, int64_t n) = 0;

  // Encoder models (BERT).
  /// out = (x - mean) / sqrt(var + eps) * weight + bias, per row of `dim` (bias may be null).
  virtual void layer_norm(const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t dim,
                          float eps, float* out) = 0;
  /// out[i] = gelu(x[i]) with the exact erf form (Hugging Face's "gelu").
  virtual void gelu(const float* x, int64_t n, float* out) = 0;
  /// y[t][i] += bias[i] for t < n_tokens.
  virtual void add_bias(float* y, const float* bias, int64_t n_tokens, int64_t dim) = 0;
  /// Attention within each sequence of a batch without a KV cache: q, k, v, out are
  /// [num_tokens][n_heads][head_dim]; sequence s owns rows [seq_starts[s], seq_starts[s+1]).
  /// Every row attends to every row of its sequence, or only to earlier ones when causal.
  virtual void dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* seq_starts,
                               int num_seqs, int n_heads, int head_dim, float scale, bool causal) = 0;

  // Optional ops, found by name (ggml's supports_op): troupe/named_ops/named_ops.hpp lists
  // each name with its signature. A name's signature never changes (a changed op gets a new
  // name), so ops are added without touching this class or the SDK fingerprint.
  /// This platform's implementation of the op called `name`, or nullptr when it offers none
  /// (the default): the caller then uses its fallback or refuses the model at load time.
  virtual OpFn find_op(std::string_view name) const;
};

}  // namespace troupe
