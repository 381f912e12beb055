#include "kernels/cpu/moe_ffn.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"  // add_bias
#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/moe_rows.hpp"
#include "troupe/check.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kUnit = 8;  // rows (pass 2) or columns (pass 4) per work unit

size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

// The call's working memory, kept by the calling thread from call to call.
struct Work {
  std::vector<uint64_t> bytes;
  uint8_t* grow(size_t n) {
    if (bytes.size() * 8 < n + 64) bytes.resize((n + 64 + 7) / 8);
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(bytes.data()) + 63) & ~uintptr_t{63});
  }
};

// Where each group's arrays live in the working memory.
struct Layout {
  std::vector<size_t> x_act, up_act, h_act;  // per group: its quantized activations
  std::vector<bool> up_shares;               // up reads gate's activations (same format)
  size_t xg = 0, h = 0, u = 0, y = 0, total = 0;
};

Layout plan(Isa isa, const MoeFfnArgs& a) {
  Layout l;
  const auto n = static_cast<size_t>(a.begin[a.n_groups]);
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t p = at;
    at += align64(bytes);
    return p;
  };
  l.xg = take(n * static_cast<size_t>(a.n_embd) * sizeof(float));
  l.h = take(n * static_cast<size_t>(a.ff) * sizeof(float));
  l.u = take(n * static_cast<size_t>(a.ff) * sizeof(float));
  l.y = take(n * static_cast<size_t>(a.n_embd) * sizeof(float));
  for (int32_t g = 0; g < a.n_groups; ++g) {
    const MoeExpertMatrices& e = a.experts[a.expert[g]];
    const int64_t t = a.begin[g + 1] - a.begin[g];
    l.x_act.push_back(take(prepared_activation_bytes(isa, e.gate.type, a.n_embd, t)));
    const bool shares = act_format(e.up.type) == act_format(e.gate.type);
    l.up_shares.push_back(shares);
    l.up_act.push_back(shares ? 0 : take(prepared_activation_bytes(isa, e.up.type, a.n_embd, t)));
    l.h_act.push_back(take(prepared_activation_bytes(isa, e.down.type, a.ff, t)));
  }
  l.total = at;
  return l;
}

// Below this many floats a quantization pass stays on the calling thread (a decode step's
// few rows): waking the pool would cost more than it saves.
constexpr int64_t kMinParallelFloats = 64 * 1024;

void run(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t floats = INT64_MAX) {
  if (pool != nullptr && pool->size() > 1 && n > 1 && floats >= kMinParallelFloats) {
    pool->parallel_for(n, fn);
  } else {
    fn(0, n);
  }
}

// Pass 2's unit: rows [o0, o1) of group g's gate and up, their biases, the activation.
void gate_up_rows(const MoeFfnArgs& a, int32_t g, const PreparedMatrix& gate, const PreparedMatrix& up, int64_t o0,
                  int64_t o1) {
  run_prepared(gate, o0, o1);
  run_prepared(up, o0, o1);
  const MoeExpertMatrices& e = a.experts[a.expert[g]];
  const int64_t n = a.begin[g + 1] - a.begin[g];
  for (int64_t t = 0; t < n; ++t) {
    float* h = gate.args.y + t * a.ff + o0;
    float* u = up.args.y + t * a.ff + o0;
    if (e.gate_bias != nullptr) add_bias(h, e.gate_bias + o0, 1, o1 - o0);
    if (e.up_bias != nullptr) add_bias(u, e.up_bias + o0, 1, o1 - o0);
    if (a.activation == 1) {
      swiglu_oai(h, u, o1 - o0, a.alpha, a.limit, h);
    } else {
      silu_mul(h, u, o1 - o0, h);
    }
  }
}

// Pass 4's unit: columns [c0, c1) of every group's down output, its bias, and each token's
// weighted share, the groups in order.
void down_columns(const MoeFfnArgs& a, const std::vector<PreparedMatrix>& down, int64_t c0, int64_t c1) {
  for (int64_t t = 0; t < a.n_tokens; ++t) std::fill(a.out + t * a.n_embd + c0, a.out + t * a.n_embd + c1, 0.0f);
  for (int32_t g = 0; g < a.n_groups; ++g) {
    run_prepared(down[static_cast<size_t>(g)], c0, c1);
    const MoeExpertMatrices& e = a.experts[a.expert[g]];
    float* y = down[static_cast<size_t>(g)].args.y;
    for (int32_t i = a.begin[g]; i < a.begin[g + 1]; ++i) {
      float* yr = y + (i - a.begin[g]) * a.n_embd;
      if (e.down_bias != nullptr) add_bias(yr + c0, e.down_bias + c0, 1, c1 - c0);
      float* o = a.out + int64_t{a.rows[i]} * a.n_embd;
      const float w = a.weights[i];
      for (int64_t c = c0; c < c1; ++c) o[c] += w * yr[c];
    }
  }
}

}  // namespace

void moe_ffn_with_isa(Isa isa, const MoeFfnArgs& a, ThreadPool* pool) {
  TROUPE_CHECK(a.n_embd > 0 && a.ff > 0 && a.n_tokens >= 1 && a.n_groups >= 0, "moe_ffn: bad shape");
  thread_local Work work;
  const Layout l = plan(isa, a);
  uint8_t* base = work.grow(l.total);
  auto* xg = reinterpret_cast<float*>(base + l.xg);
  auto* h = reinterpret_cast<float*>(base + l.h);
  auto* u = reinterpret_cast<float*>(base + l.u);
  auto* y = reinterpret_cast<float*>(base + l.y);
  const auto G = static_cast<size_t>(a.n_groups);
  std::vector<PreparedMatrix> gate(G), up(G), down(G);
  const int64_t assigned = a.begin[a.n_groups];
  // (1) Each group's rows gathered and quantized for its gate (and up).
  run(pool, a.n_groups, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const MoeExpertMatrices& e = a.experts[a.expert[g]];
      const int32_t b = a.begin[g];
      const int64_t n = a.begin[g + 1] - b;
      float* xr = xg + b * a.n_embd;
      gather_rows(a.x, a.n_embd, a.rows + b, n, xr);
      MatmulJob gj = e.gate, uj = e.up;
      gj.y = h + b * a.ff;
      uj.y = u + b * a.ff;
      prepare_matrix(isa, gj, a.n_embd, xr, n, base + l.x_act[static_cast<size_t>(g)], &gate[static_cast<size_t>(g)]);
      if (l.up_shares[static_cast<size_t>(g)]) {
        prepare_matrix_like(isa, gate[static_cast<size_t>(g)], uj, a.n_embd, xr, n, &up[static_cast<size_t>(g)]);
      } else {
        prepare_matrix(isa, uj, a.n_embd, xr, n, base + l.up_act[static_cast<size_t>(g)], &up[static_cast<size_t>(g)]);
      }
    }
  }, assigned * a.n_embd);
  // (2) Every group's gate and up rows in one pass, 8 rows of one expert per unit; a thread's
  // units of one expert run as one range (the kernels' widest row tiles apply).
  const int64_t row_units = (a.ff + kUnit - 1) / kUnit;
  run(pool, a.n_groups * row_units, [&](int64_t u0, int64_t u1) {
    for (int64_t i = u0; i < u1;) {
      const auto g = static_cast<int32_t>(i / row_units);
      const int64_t end = std::min(u1, (g + int64_t{1}) * row_units);
      const int64_t o0 = i % row_units * kUnit, o1 = std::min(a.ff, (end - int64_t{g} * row_units) * kUnit);
      gate_up_rows(a, g, gate[static_cast<size_t>(g)], up[static_cast<size_t>(g)], o0, o1);
      i = end;
    }
  });
  // (3) Each group's activations quantized for its down.
  run(pool, a.n_groups, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const MoeExpertMatrices& e = a.experts[a.expert[g]];
      const int32_t b = a.begin[g];
      MatmulJob dj = e.down;
      dj.y = y + b * a.n_embd;
      prepare_matrix(isa, dj, a.ff, h + b * a.ff, a.begin[g + 1] - b, base + l.h_act[static_cast<size_t>(g)],
                     &down[static_cast<size_t>(g)]);
    }
  }, assigned * a.ff);
  // (4) The output's columns in one pass: every group's down, in order, then the shares.
  const int64_t col_units = (a.n_embd + kUnit - 1) / kUnit;
  run(pool, col_units, [&](int64_t c0, int64_t c1) {
    down_columns(a, down, c0 * kUnit, std::min(a.n_embd, c1 * kUnit));
  });
}

void moe_ffn(const MoeFfnArgs& a, ThreadPool* pool) { moe_ffn_with_isa(active_isa(), a, pool); }

}  // namespace troupe::kernels::cpu
