// The optional ops a platform may offer by name (Ops::find_op), ggml-style: each op is
// a type with its name and its function-pointer signature. The first argument is the
// platform's own Ops, so an implementation reaches its device state through it.
//
// This header is not part of the SDK fingerprint (include/troupe/*.hpp): adding an op
// here rebuilds no plugin. The rule that makes that safe: an op's name and signature,
// once published, never change. An op whose meaning or signature changes gets a new
// name (".v2"), and a plugin built before it simply does not offer it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "troupe/ops.hpp"

namespace troupe::named_ops {

/// Token selection on the device, so only token ids leave it: out[r] (device memory,
/// int32) = the token of row r of logits [rows][vocab] (device memory) under params[r]
/// (host memory), as TokenSelection says. Returns false when it cannot for these rows:
/// the caller then copies the logits out and samples on the host.
struct SelectTokens {
  static constexpr std::string_view name = "select_tokens.v1";
  using Fn = bool (*)(Ops& ops, const float* logits, int64_t rows, int64_t vocab, const TokenSelection* params,
                      int32_t* out);
};

/// Gemma's gated MLP activation: out[i] = gelu_tanh(gate[i]) * up[i], with
/// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Device memory; out may
/// alias gate or up.
struct GeluTanhMul {
  static constexpr std::string_view name = "gelu_tanh_mul.v1";
  using Fn = void (*)(Ops& ops, const float* gate, const float* up, int64_t n, float* out);
};

/// The tanh GELU (GPT-2's MLP activation, ggml_gelu): out[i] = gelu_tanh(x[i]), the formula
/// of GeluTanhMul. Device memory; out may alias x.
struct GeluTanh {
  static constexpr std::string_view name = "gelu_tanh.v1";
  using Fn = void (*)(Ops& ops, const float* x, int64_t n, float* out);
};

/// Soft-capping in place (Gemma 2's final logits): x[i] = cap * tanh(x[i] / cap), cap > 0.
struct SoftCap {
  static constexpr std::string_view name = "softcap.v1";
  using Fn = void (*)(Ops& ops, float* x, int64_t n, float cap);
};

/// Scaling in place: x[i] *= factor (Gemma's embeddings by sqrt(n_embd)).
struct Scale {
  static constexpr std::string_view name = "scale.v1";
  using Fn = void (*)(Ops& ops, float* x, int64_t n, float factor);
};

/// The platform's host threads for a kernel a plugin brings (a weight format's matmul on
/// the CPU): body(ctx, begin, end) over parts of [0, n) that cover it once, possibly in
/// parallel; returns when all have run. Parts must be independent.
struct ParallelFor {
  static constexpr std::string_view name = "parallel_for.v1";
  using Body = void (*)(void* ctx, int64_t begin, int64_t end);
  using Fn = void (*)(Ops& ops, int64_t n, Body body, void* ctx);
};

/// `ops`'s implementation of Op, or nullptr when it does not offer it.
template <class Op>
typename Op::Fn find(const Ops& ops) {
  return reinterpret_cast<typename Op::Fn>(ops.find_op(Op::name));
}
template <class Op>
bool supports(const Ops& ops) {
  return find<Op>(ops) != nullptr;
}

/// One row of a platform's table of the ops it offers (see lookup()).
struct Entry {
  std::string_view name;
  OpFn fn;
};
template <class Op>
inline Entry entry(typename Op::Fn fn) {
  return Entry{Op::name, reinterpret_cast<OpFn>(fn)};
}
/// The function of `name` in `table`, or nullptr: what a platform's find_op returns.
inline OpFn lookup(std::span<const Entry> table, std::string_view name) {
  for (const Entry& e : table)
    if (e.name == name) return e.fn;
  return nullptr;
}

}  // namespace troupe::named_ops
