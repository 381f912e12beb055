// The mixture-of-experts named ops of the target against the reference: gather_rows.v1,
// scatter_add_rows.v1 (rows named twice, in order), swiglu_oai.v1 (values past the clamp),
// and moe_ffn.v1, a whole layer's experts (groups of one and of many tokens, an expert no
// token chose, gpt-oss's biases and activation) in every weight type both claim. A target
// without an op is a not_offered case: MoE models then run on the other ops (the row ops are
// what the models need without moe_ffn.v1; without them the models are refused at load).
#include <algorithm>
#include <string>
#include <vector>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"
#include "troupe/named_ops/moe_ops.hpp"

namespace troupe::conformance {
namespace {

struct MoeChecker {
  Session& target;
  Session& reference;
  const Options& options;
  Rng& rng;
  Report* report;

  template <class Op>
  bool both_offer() {
    return conformance::both_offer<Op>(
        target, reference, options, report,
        "mixture-of-experts models use the row ops instead (or are refused at load without them)");
  }

  void run(std::string_view op, std::string shp, std::string dtype, double tol, const RunFn& fn) {
    CaseResult c;
    c.group = "ops";
    c.op = std::string(op);
    c.shape = std::move(shp);
    c.dtype = std::move(dtype);
    c.tolerance = tol;
    compare_case(target, reference, report, std::move(c), fn);
  }

  void row_ops() {
    const int64_t len = 96, tokens = 7;
    const std::vector<int32_t> rows = {3, 0, 6, 3, 1};  // row 3 twice: its shares in order
    const std::vector<float> weights = {0.5f, 0.25f, 1.0f, -0.75f, 2.0f};
    const auto src = random_floats(rng, tokens * len), dst = random_floats(rng, tokens * len);
    const auto n = static_cast<int64_t>(rows.size());
    const std::string shp = "rows=" + std::to_string(n) + " len=" + std::to_string(len);
    if (both_offer<named_ops::GatherRows>())
      run(named_ops::GatherRows::name, shp, "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
        CONFORMANCE_ASSIGN(sd, s.put(src));
        CONFORMANCE_ASSIGN(out, s.scratch(n * len * 4));
        named_ops::find<named_ops::GatherRows>(s.ops())(s.ops(), sd, len, rows.data(), n, static_cast<float*>(out));
        return s.get(static_cast<float*>(out), n * len);
      });
    if (both_offer<named_ops::ScatterAddRows>())
      run(named_ops::ScatterAddRows::name, shp, "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
        CONFORMANCE_ASSIGN(sd, s.put(src));
        CONFORMANCE_ASSIGN(dd, s.put(dst));
        named_ops::find<named_ops::ScatterAddRows>(s.ops())(s.ops(), sd, len, rows.data(), weights.data(), n, dd);
        return s.get(dd, tokens * len);
      });
    if (both_offer<named_ops::SwigluOai>())
      for (int64_t count : {1, 4097}) {
        const auto g = random_floats(rng, count, -12, 12), u = random_floats(rng, count, -12, 12);
        run(named_ops::SwigluOai::name, "n=" + std::to_string(count), "f32", kF32Tolerance,
            [&](Session& s) -> Result<std::vector<float>> {
              CONFORMANCE_ASSIGN(gd, s.put(g));
              CONFORMANCE_ASSIGN(ud, s.put(u));
              CONFORMANCE_ASSIGN(out, s.scratch(count * 4));
              named_ops::find<named_ops::SwigluOai>(s.ops())(s.ops(), gd, ud, count, 1.702f, 7.0f,
                                                            static_cast<float*>(out));
              return s.get(static_cast<float*>(out), count);
            });
      }
  }

  // One layer of 4 experts (expert 3 never chosen), 6 tokens choosing 2 each, or one token.
  void layer(DType type, bool biased, int64_t tokens) {
    const int64_t E = 2 * std::max<int64_t>(block_elems(type), 32), ff = E;
    const int n_exp = 4;
    std::vector<std::vector<uint8_t>> w;
    std::vector<std::vector<float>> b;
    for (int e = 0; e < 3 * n_exp; ++e) {
      auto m = random_weight(rng, type, e % 3 == 2 ? E : ff, e % 3 == 2 ? ff : E);
      if (!m.ok()) return;
      w.push_back(*m);
      b.push_back(random_floats(rng, e % 3 == 2 ? E : ff, -0.5f, 0.5f));
    }
    // Groups by expert: tokens t choose experts t % 3 and (t + 1) % 3.
    std::vector<int32_t> expert, begin = {0}, rows;
    std::vector<float> weights;
    for (int32_t e = 0; e < 3; ++e) {
      for (int32_t t = 0; t < tokens; ++t)
        if (t % 3 == e || (t + 1) % 3 == e) {
          rows.push_back(t);
          weights.push_back(0.25f + 0.1f * static_cast<float>(t % 4));
        }
      if (static_cast<int32_t>(rows.size()) == begin.back()) continue;
      expert.push_back(e);
      begin.push_back(static_cast<int32_t>(rows.size()));
    }
    const auto x = random_floats(rng, tokens * E);
    const std::string shp = "experts=" + std::to_string(n_exp) + " n_embd=" + std::to_string(E) +
                            " ff=" + std::to_string(ff) + " tokens=" + std::to_string(tokens) +
                            (biased ? " biased swiglu_oai" : " silu");
    run(named_ops::MoeFfn::name, shp, std::string(to_string(type)), tolerance_for(type),
        [&](Session& s) -> Result<std::vector<float>> {
          std::vector<WeightTensor> t(w.size()), bt(b.size());
          for (size_t i = 0; i < w.size(); ++i) {
            CONFORMANCE_ASSIGN(wp, s.put(w[i].data(), static_cast<int64_t>(w[i].size())));
            CONFORMANCE_ASSIGN(bp, s.put(b[i]));
            const bool down = i % 3 == 2;
            t[i].name = "moe";
            t[i].type = type;
            t[i].n_dims = 2;
            t[i].ne[0] = down ? ff : E;
            t[i].ne[1] = down ? E : ff;
            t[i].data = wp;
            t[i].nbytes = w[i].size();
            bt[i].type = DType::f32;
            bt[i].ne[0] = static_cast<int64_t>(b[i].size());
            bt[i].data = bp;
          }
          std::vector<WeightTensor> gate, up, down, gb, ub, db;
          for (int e = 0; e < n_exp; ++e) {
            gate.push_back(t[3 * e]), up.push_back(t[3 * e + 1]), down.push_back(t[3 * e + 2]);
            gb.push_back(bt[3 * e]), ub.push_back(bt[3 * e + 1]), db.push_back(bt[3 * e + 2]);
          }
          named_ops::MoeExpertsView v;
          v.n_experts = n_exp;
          v.gate = gate.data(), v.up = up.data(), v.down = down.data();
          if (biased) v.gate_bias = gb.data(), v.up_bias = ub.data(), v.down_bias = db.data();
          v.activation = biased ? 1 : 0;
          v.alpha = 1.702f, v.limit = 7.0f;
          named_ops::MoeAssignments a;
          a.n_groups = static_cast<int32_t>(expert.size());
          a.expert = expert.data(), a.begin = begin.data(), a.rows = rows.data(), a.weights = weights.data();
          CONFORMANCE_ASSIGN(xd, s.put(x));
          CONFORMANCE_ASSIGN(out, s.scratch(tokens * E * 4));
          named_ops::find<named_ops::MoeFfn>(s.ops())(s.ops(), v, xd, tokens, E, a, static_cast<float*>(out));
          return s.get(static_cast<float*>(out), tokens * E);
        });
  }
};

}  // namespace

void check_moe_ops(Session& target, Session& reference, const std::vector<DType>& types, const Options& options,
                   Rng& rng, Report* report) {
  MoeChecker k{target, reference, options, rng, report};
  k.row_ops();
  if (!k.both_offer<named_ops::MoeFfn>()) return;
  for (DType t : types)
    for (int64_t tokens : {1, 6}) k.layer(t, tokens == 6, tokens);
}

}  // namespace troupe::conformance
