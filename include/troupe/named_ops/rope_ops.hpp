// Named rotary-embedding ops beyond Ops::rope (see named_ops.hpp for the rules).
#pragma once

#include <cstdint>
#include <string_view>

#include "troupe/named_ops/named_ops.hpp"

namespace troupe::named_ops {

/// Rotary embedding with per-pair frequency factors (ggml's rope_ext without YaRN ramps),
/// in place on x [n_tokens][n_heads][head_dim] (device memory): pair i of a head at position
/// p turns by p * theta^(-2i/head_dim) / freq_factors[i], and both outputs are scaled by
/// mscale. freq_factors (device memory, head_dim/2 floats) may be null: all 1. Pairs are
/// (i, i+head_dim/2) when neox, else (2i, 2i+1); positions are host memory as in Ops::rope.
/// Llama 3's rope_freqs, linear scaling (every factor the same) and Phi-3's long/short
/// factors are all this op.
struct RopeFreqFactors {
  static constexpr std::string_view name = "rope_freq_factors.v1";
  using Fn = void (*)(Ops& ops, float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                      float theta, bool neox, const float* freq_factors, float mscale);
};

}  // namespace troupe::named_ops
