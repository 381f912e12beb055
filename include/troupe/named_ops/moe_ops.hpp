// Named ops of mixture-of-experts layers (see named_ops.hpp for the rules: a published
// name never changes its signature). A MoE layer routes on the host, groups the step's
// tokens by expert, and runs each chosen expert once over its tokens:
//   gather_rows.v1       the rows of an expert's tokens into one block
//   (Ops::matmul / matmul_silu_mul / add_bias on the expert's matrices)
//   swiglu_oai.v1        gpt-oss's clamped SwiGLU
//   scatter_add_rows.v1  each token's weighted share back into the layer's output
// or, where a platform offers it, moe_ffn.v1: all of that in one call.
#pragma once

#include <cstdint>
#include <string_view>

#include "troupe/model.hpp"
#include "troupe/named_ops/named_ops.hpp"

namespace troupe::named_ops {

/// dst[i] = src[rows[i]] for i < n: rows of row_len floats (device memory); rows is host memory.
struct GatherRows {
  static constexpr std::string_view name = "gather_rows.v1";
  using Fn = void (*)(Ops& ops, const float* src, int64_t row_len, const int32_t* rows, int64_t n, float* dst);
};

/// dst[rows[i]] += weights[i] * src[i] for i = 0, 1, ..., n - 1 in that order (a row named
/// twice gets both, the earlier first): rows of row_len floats (device memory); rows and
/// weights are host memory.
struct ScatterAddRows {
  static constexpr std::string_view name = "scatter_add_rows.v1";
  using Fn = void (*)(Ops& ops, const float* src, int64_t row_len, const int32_t* rows, const float* weights,
                      int64_t n, float* dst);
};

/// gpt-oss's clamped SwiGLU (ggml_swiglu_oai): with g = min(gate[i], limit) and
/// u = clamp(up[i], -limit, limit), out[i] = g / (1 + exp(-alpha g)) * (u + 1). Device
/// memory; out may alias gate or up.
struct SwigluOai {
  static constexpr std::string_view name = "swiglu_oai.v1";
  using Fn = void (*)(Ops& ops, const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
};

/// The experts of one MoE layer that this rank computes (device memory): per local expert e,
/// gate[e] and up[e] ({n_embd, ff}) and down[e] ({ff, n_embd}) views, and optional f32 bias
/// vectors (data null: none; gpt-oss has them).
struct MoeExpertsView {
  int32_t n_experts = 0;
  const WeightTensor* gate = nullptr;       // [n_experts]
  const WeightTensor* up = nullptr;         // [n_experts]
  const WeightTensor* down = nullptr;       // [n_experts]
  const WeightTensor* gate_bias = nullptr;  // [n_experts] {ff}, or nullptr
  const WeightTensor* up_bias = nullptr;    // [n_experts] {ff}, or nullptr
  const WeightTensor* down_bias = nullptr;  // [n_experts] {n_embd}, or nullptr
  /// 0: silu(gate) * up; 1: SwigluOai with alpha and limit.
  int32_t activation = 0;
  float alpha = 0.0f, limit = 0.0f;
};

/// One step's assignments to those experts, grouped by expert (host memory): group g is
/// local expert expert[g] over the token rows rows[begin[g] .. begin[g+1]) with their weights.
struct MoeAssignments {
  int32_t n_groups = 0;
  const int32_t* expert = nullptr;  // [n_groups], ascending
  const int32_t* begin = nullptr;   // [n_groups + 1]
  const int32_t* rows = nullptr;
  const float* weights = nullptr;
};

/// A MoE layer's experts in one call: out[t] (n_tokens rows of n_embd floats, overwritten)
/// = the sum over the groups in order of weight * (down_e(act(gate_e x_t + gate_bias_e,
/// up_e x_t + up_bias_e)) + down_bias_e), exactly as gather_rows, the matmuls, the
/// activation and scatter_add_rows in that order give it. x and out are device memory.
struct MoeFfn {
  static constexpr std::string_view name = "moe_ffn.v1";
  using Fn = void (*)(Ops& ops, const MoeExpertsView& experts, const float* x, int64_t n_tokens, int64_t n_embd,
                      const MoeAssignments& assignments, float* out);
};

}  // namespace troupe::named_ops
