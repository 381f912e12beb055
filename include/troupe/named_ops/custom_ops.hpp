// The ops of a model's forward pass that plugins may override by name, with
// vLLM's CustomOp names. Each op is a type: its name, its function-pointer
// signature and its native implementation (the platform's Ops). An override
// gets the platform's Ops first, so it can wrap or delegate to them. Models
// make their ops with custom_ops::make<Op>() once, at construction; a general
// plugin registers with custom_ops::register_oot<Op>(fn) when it loads.
//
// Like named_ops.hpp beside it, this header is not part of the SDK fingerprint
// (cmake/SdkHeaders.cmake): an op type is its name and signature, and a published
// one never changes (a changed op gets a new name), so a model family that brings
// a new overridable op adds it here without rebuilding any plugin.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "troupe/custom_op.hpp"
#include "troupe/ops.hpp"

namespace troupe::custom_ops {

struct RmsNorm {
  static constexpr std::string_view name = "rms_norm";
  using Fn = void (*)(Ops& ops, const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps,
                      float* out);
  static void native(Ops& ops, const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps,
                     float* out) {
    ops.rms_norm(x, weight, n_tokens, dim, eps, out);
  }
};

struct RotaryEmbedding {
  static constexpr std::string_view name = "rotary_embedding";
  using Fn = void (*)(Ops& ops, float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                      float theta, bool neox);
  static void native(Ops& ops, float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                     float theta, bool neox) {
    ops.rope(x, positions, n_tokens, n_heads, head_dim, theta, neox);
  }
};

/// out = silu(gate) * up. While it is native, models may fuse it into the gate and up
/// projections (Ops::matmul_silu_mul); an override makes them run it on its own.
struct SiluAndMul {
  static constexpr std::string_view name = "silu_and_mul";
  using Fn = void (*)(Ops& ops, const float* gate, const float* up, int64_t n, float* out);
  static void native(Ops& ops, const float* gate, const float* up, int64_t n, float* out) {
    ops.silu_mul(gate, up, n, out);
  }
};

/// The implementation of Op to run now: an out-of-tree override, else the active
/// platform's, else the native one.
template <class Op>
CustomOp<typename Op::Fn> make() {
  return CustomOp<typename Op::Fn>(std::string(Op::name), &Op::native);
}
/// Overrides Op in this process (a general plugin's register function calls it).
template <class Op>
void register_oot(typename Op::Fn fn) {
  register_custom_op_oot(Op::name, fn);
}
/// Op's implementation on platforms of `device_type`.
template <class Op>
void register_for_platform(std::string_view device_type, typename Op::Fn fn) {
  register_custom_op_for_platform(Op::name, device_type, fn);
}

}  // namespace troupe::custom_ops
