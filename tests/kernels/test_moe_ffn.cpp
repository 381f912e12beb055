// moe_ffn (the CPU's moe_ffn.v1) against the row ops it replaces, bit for bit: per group,
// gather_rows, matmul_silu_mul (or the two matmuls, the biases and the activation), matmul,
// scatter_add_rows, in group order; on every ISA, pool size and weight type the MoE files
// use (Q4_K, Q6_K down, Q8_0, MXFP4, f32), with biases and gpt-oss's activation, decode
// (one token) and prefill (many, groups of every size), and experts no token chose.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/moe_ffn.hpp"
#include "kernels/cpu/moe_rows.hpp"
#include "kernels/cpu/quant_blocks.hpp"  // kMxfp4
#include "kernels/cpu/quantize.hpp"

namespace troupe::kernels::cpu {
namespace {

struct Experts {
  std::vector<std::vector<uint8_t>> bytes;  // gate, up, down per expert
  std::vector<std::vector<float>> biases;   // gate, up, down per expert (when biased)
  std::vector<MoeExpertMatrices> m;
};

std::vector<uint8_t> random_matrix(DType type, int64_t in, int64_t out, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> f(static_cast<size_t>(in * out));
  for (float& v : f) v = d(rng);
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(type, in) * out));
  for (int64_t o = 0; o < out; ++o)
    quantize_row_reference(type, f.data() + o * in, q.data() + o * row_bytes(type, in), in);
  return q;
}

Experts make_experts(int n, DType gu, DType down, int64_t E, int64_t ff, bool biased, std::mt19937& rng) {
  Experts x;
  std::normal_distribution<float> d(0.0f, 0.1f);
  for (int e = 0; e < n; ++e) {
    x.bytes.push_back(random_matrix(gu, E, ff, rng));
    x.bytes.push_back(random_matrix(gu, E, ff, rng));
    x.bytes.push_back(random_matrix(down, ff, E, rng));
    for (int64_t len : {ff, ff, E}) {
      x.biases.emplace_back(static_cast<size_t>(len));
      for (float& v : x.biases.back()) v = d(rng);
    }
  }
  for (int e = 0; e < n; ++e) {
    MoeExpertMatrices m;
    m.gate = {gu, x.bytes[3 * e].data(), ff, nullptr};
    m.up = {gu, x.bytes[3 * e + 1].data(), ff, nullptr};
    m.down = {down, x.bytes[3 * e + 2].data(), E, nullptr};
    if (biased) {
      m.gate_bias = x.biases[3 * e].data();
      m.up_bias = x.biases[3 * e + 1].data();
      m.down_bias = x.biases[3 * e + 2].data();
    }
    x.m.push_back(m);
  }
  return x;
}

// The row ops, group by group, as the runtime composes them without moe_ffn.v1.
std::vector<float> composed(Isa isa, const MoeFfnArgs& a) {
  std::vector<float> out(static_cast<size_t>(a.n_tokens * a.n_embd), 0.0f);
  for (int32_t g = 0; g < a.n_groups; ++g) {
    const MoeExpertMatrices& e = a.experts[a.expert[g]];
    const int64_t n = a.begin[g + 1] - a.begin[g];
    std::vector<float> xe(static_cast<size_t>(n * a.n_embd)), h(static_cast<size_t>(n * a.ff)), u(h.size());
    std::vector<float> y(static_cast<size_t>(n * a.n_embd));
    gather_rows(a.x, a.n_embd, a.rows + a.begin[g], n, xe.data());
    MatmulJob gj = e.gate, uj = e.up, dj = e.down;
    gj.y = h.data();
    uj.y = u.data();
    if (a.activation == 0 && e.gate_bias == nullptr) {
      matmul_silu_mul_with_isa(isa, gj, uj, a.n_embd, xe.data(), n, nullptr);
    } else {
      const MatmulJob jobs[2] = {gj, uj};
      matmul_multi_with_isa(isa, jobs, 2, a.n_embd, xe.data(), n, nullptr);
      if (e.gate_bias != nullptr) {
        add_bias(h.data(), e.gate_bias, n, a.ff);
        add_bias(u.data(), e.up_bias, n, a.ff);
      }
      if (a.activation == 1) {
        swiglu_oai(h.data(), u.data(), n * a.ff, a.alpha, a.limit, h.data());
      } else {
        silu_mul(h.data(), u.data(), n * a.ff, h.data());
      }
    }
    matmul_with_isa(isa, dj.type, dj.w, a.ff, a.n_embd, h.data(), n, y.data(), nullptr);
    if (e.down_bias != nullptr) add_bias(y.data(), e.down_bias, n, a.n_embd);
    scatter_add_rows(y.data(), a.n_embd, a.rows + a.begin[g], a.weights + a.begin[g], n, out.data());
  }
  return out;
}

struct Step {
  std::vector<int32_t> expert, begin, rows;
  std::vector<float> weights;
};

// Each of n_tokens tokens picks k distinct experts of n (some never picked); grouped by expert.
Step route(int n, int k, int64_t n_tokens, std::mt19937& rng) {
  std::vector<std::vector<std::pair<int32_t, float>>> by(static_cast<size_t>(n));
  std::uniform_real_distribution<float> w(0.05f, 0.5f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<int> ids(static_cast<size_t>(n - 1));
    for (int i = 0; i < n - 1; ++i) ids[static_cast<size_t>(i)] = i;  // expert n - 1: never chosen
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int j = 0; j < k; ++j) by[static_cast<size_t>(ids[static_cast<size_t>(j)])].push_back({int32_t(t), w(rng)});
  }
  Step s;
  s.begin.push_back(0);
  for (int e = 0; e < n; ++e) {
    if (by[static_cast<size_t>(e)].empty()) continue;
    s.expert.push_back(e);
    for (auto [t, wt] : by[static_cast<size_t>(e)]) {
      s.rows.push_back(t);
      s.weights.push_back(wt);
    }
    s.begin.push_back(static_cast<int32_t>(s.rows.size()));
  }
  return s;
}

struct Kind {
  DType gu, down;
  bool biased;
  int activation;
};

TEST(MoeFfn, BitIdenticalToTheRowOpsOnEveryIsaAndPool) {
  const int64_t E = 256, ff = 512;
  std::mt19937 rng(7);
  for (const Kind& kind : {Kind{DType::q4_k, DType::q6_k, false, 0}, Kind{DType::q8_0, DType::q8_0, false, 0},
                           Kind{kMxfp4, kMxfp4, true, 1}, Kind{DType::f32, DType::f32, true, 0}}) {
    const Experts ex = make_experts(8, kind.gu, kind.down, E, ff, kind.biased, rng);
    // 128 tokens: the quantization passes go to the pool (over moe_ffn.cpp's 64 Ki floats).
    for (int64_t n_tokens : {int64_t{1}, int64_t{5}, int64_t{40}, int64_t{128}}) {
      const Step st = route(8, 3, n_tokens, rng);
      std::vector<float> x(static_cast<size_t>(n_tokens * E));
      std::normal_distribution<float> d(0.0f, 1.0f);
      for (float& v : x) v = d(rng);
      MoeFfnArgs a;
      a.experts = ex.m.data();
      a.n_embd = E;
      a.ff = ff;
      a.activation = kind.activation;
      a.alpha = 1.702f;
      a.limit = 7.0f;
      a.n_groups = static_cast<int32_t>(st.expert.size());
      a.expert = st.expert.data();
      a.begin = st.begin.data();
      a.rows = st.rows.data();
      a.weights = st.weights.data();
      a.x = x.data();
      a.n_tokens = n_tokens;
      for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
        if (!isa_available(isa)) continue;
        const std::vector<float> want = composed(isa, a);
        for (int threads : {1, 2, 3}) {
          SCOPED_TRACE(std::string(to_string(kind.gu)) + ", " + std::to_string(n_tokens) + " tokens, isa " +
                       to_string(isa) + ", " + std::to_string(threads) + " threads");
          ThreadPool pool(threads);
          std::vector<float> out(want.size(), 1e30f);  // overwritten, whatever it held
          a.out = out.data();
          moe_ffn_with_isa(isa, a, &pool);
          EXPECT_EQ(out, want);
        }
      }
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
