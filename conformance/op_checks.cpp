// Every Ops method of the target against the reference: random inputs and
// shapes with their edge cases, for every weight type both platforms claim.
#include <algorithm>
#include <string>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"
#include "troupe/named_ops/named_ops.hpp"
#include "troupe/named_ops/rope_ops.hpp"

namespace troupe::conformance {

void check_attention(Session& target, Session& reference, const Options& options, Rng& rng, Report* report);
void check_communicator(Session& target, Session& reference, const Options& options, Rng& rng, Report* report);
void check_token_selection(Session& target, Session& reference, const Options& options, Rng& rng, Report* report);
void check_weight_formats(Session& target, const Options& options, Rng& rng, Report* report);
void check_moe_ops(Session& target, Session& reference, const std::vector<DType>& types, const Options& options,
                   Rng& rng, Report* report);

namespace {

std::string shape(std::initializer_list<std::pair<const char*, int64_t>> dims) {
  std::string s;
  for (const auto& [name, v] : dims) {
    if (!s.empty()) s += ' ';
    s += name;
    s += '=';
    s += std::to_string(v);
  }
  return s;
}

/// A weight of `type` with the given bytes, placed in the session's memory.
Result<WeightTensor> put_weight(Session& s, DType type, int64_t rows, int64_t cols, const std::vector<uint8_t>& bytes,
                                int64_t row_stride) {
  auto p = s.put(bytes.data(), static_cast<int64_t>(bytes.size()));
  if (!p.ok()) return p.status();
  WeightTensor w;
  w.name = "conformance";
  w.type = type;
  w.n_dims = 2;
  w.ne[0] = cols;
  w.ne[1] = rows;
  w.data = *p;
  w.nbytes = bytes.size();
  w.row_stride = row_stride;
  return w;
}

struct Checker {
  Session& target;
  Session& reference;
  const Options& options;
  Rng& rng;
  Report* report;
  std::vector<DType> types;

  bool wants(const char* op) const { return selected(options, "ops", op); }
  void run(const char* op, std::string shp, std::string dtype, double tol, const RunFn& fn) {
    CaseResult c;
    c.group = "ops";
    c.op = op;
    c.shape = std::move(shp);
    c.dtype = std::move(dtype);
    c.tolerance = tol;
    compare_case(target, reference, report, std::move(c), fn);
  }

  void matmuls() {
    for (DType t : types) {
      const int64_t b = std::max<int64_t>(block_elems(t), 32);
      const std::string tn(to_string(t));
      struct Shape { int64_t in, out, tokens, stride_pad; };
      std::vector<Shape> shapes = {{b, 1, 1, 0}, {2 * b, 7, 1, 0}, {4 * b, 33, 5, 0}, {2 * b, 64, 17, 0}};
      if (block_elems(t) == 1) shapes.push_back({33, 5, 3, 0});  // a row that is not a multiple of any vector width
      shapes.push_back({2 * b, 5, 2, 64});                        // rows farther apart than they are long
      if (wants("matmul"))
        for (const Shape& sh : shapes) {
          const int64_t stride = sh.stride_pad ? row_bytes(t, sh.in) + sh.stride_pad : 0;
          auto w = random_weight(rng, t, sh.out, sh.in, stride);
          const auto x = random_floats(rng, sh.tokens * sh.in);
          if (!w.ok()) continue;
          run("matmul", shape({{"in", sh.in}, {"out", sh.out}, {"tokens", sh.tokens}, {"row_stride", stride}}), tn,
              tolerance_for(t), [&](Session& s) -> Result<std::vector<float>> {
                CONFORMANCE_ASSIGN(wt, put_weight(s, t, sh.out, sh.in, *w, stride));
                CONFORMANCE_ASSIGN(xd, s.put(x));
                CONFORMANCE_ASSIGN(y, s.scratch(sh.tokens * sh.out * 4));
                s.ops().matmul(wt, xd, sh.tokens, static_cast<float*>(y));
                return s.get(static_cast<float*>(y), sh.tokens * sh.out);
              });
        }
      if (wants("matmul_multi"))
        for (int64_t tokens : {1, 6}) {
          const int64_t in = 2 * b, outs[3] = {24, 8, 8};
          std::vector<std::vector<uint8_t>> ws;
          for (int64_t o : outs) ws.push_back(*random_weight(rng, t, o, in));
          const auto x = random_floats(rng, tokens * in);
          run("matmul_multi", shape({{"n", 3}, {"in", in}, {"out", 24}, {"tokens", tokens}}), tn, tolerance_for(t),
              [&](Session& s) -> Result<std::vector<float>> {
                WeightTensor wt[3];
                float* ys[3];
                const WeightTensor* wp[3];
                for (int j = 0; j < 3; ++j) {
                  CONFORMANCE_ASSIGN(w, put_weight(s, t, outs[j], in, ws[static_cast<size_t>(j)], 0));
                  wt[j] = w;
                  wp[j] = &wt[j];
                  CONFORMANCE_ASSIGN(y, s.scratch(tokens * outs[j] * 4));
                  ys[j] = static_cast<float*>(y);
                }
                CONFORMANCE_ASSIGN(xd, s.put(x));
                s.ops().matmul_multi(wp, ys, 3, xd, tokens);
                std::vector<float> all;
                for (int j = 0; j < 3; ++j) {
                  CONFORMANCE_ASSIGN(part, s.get(ys[j], tokens * outs[j]));
                  all.insert(all.end(), part.begin(), part.end());
                }
                return all;
              });
        }
      if (wants("matmul_silu_mul"))
        for (int64_t tokens : {1, 6}) {
          const int64_t in = 2 * b, rows = 40;
          auto g = *random_weight(rng, t, rows, in), u = *random_weight(rng, t, rows, in);
          const auto x = random_floats(rng, tokens * in);
          run("matmul_silu_mul", shape({{"in", in}, {"out", rows}, {"tokens", tokens}}), tn, tolerance_for(t),
              [&](Session& s) -> Result<std::vector<float>> {
                CONFORMANCE_ASSIGN(gw, put_weight(s, t, rows, in, g, 0));
                CONFORMANCE_ASSIGN(uw, put_weight(s, t, rows, in, u, 0));
                CONFORMANCE_ASSIGN(xd, s.put(x));
                CONFORMANCE_ASSIGN(out, s.scratch(tokens * rows * 4));
                CONFORMANCE_ASSIGN(scratch, s.scratch(tokens * rows * 4));
                s.ops().matmul_silu_mul(gw, uw, xd, tokens, static_cast<float*>(out), static_cast<float*>(scratch));
                return s.get(static_cast<float*>(out), tokens * rows);
              });
        }
      if (wants("embedding"))
        for (int64_t n : {1, 9}) {
          const int64_t rows = 50, dim = 2 * b;
          auto w = *random_weight(rng, t, rows, dim);
          std::vector<int32_t> ids = {static_cast<int32_t>(rows - 1)};
          std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(rows - 1));
          while (static_cast<int64_t>(ids.size()) < n) ids.push_back(ids.size() == 1 ? 0 : id(rng));
          run("embedding", shape({{"rows", rows}, {"dim", dim}, {"ids", n}}), tn, kF32Tolerance,
              [&](Session& s) -> Result<std::vector<float>> {
                CONFORMANCE_ASSIGN(wt, put_weight(s, t, rows, dim, w, 0));
                CONFORMANCE_ASSIGN(out, s.scratch(n * dim * 4));
                s.ops().embedding(wt, ids.data(), n, static_cast<float*>(out));  // ids: host memory
                return s.get(static_cast<float*>(out), n * dim);
              });
        }
    }
  }

  /// Whether both offer named op Op; a target without it is a not_offered case, a reference
  /// without it a note.
  template <class Op>
  bool both_offer(const char* needed_by = "gemma2, gemma3") {
    return conformance::both_offer<Op>(target, reference, options, report,
                                       std::string("models that need it (") + needed_by + ") are refused at load");
  }

  // RoPE with per-pair frequency factors and a magnitude scale (Llama 3's rope_freqs: factors
  // from 1 to 32), both pairings, positions past 8192 where the factors matter most.
  void rope_with_factors() {
    if (!both_offer<named_ops::RopeFreqFactors>("llama files with rope_freqs or rope scaling")) return;
    for (bool neox : {false, true})
      for (bool with_factors : {true, false})
        for (auto [tokens, heads, hd] : {std::tuple<int64_t, int, int>{1, 1, 2}, {5, 3, 64}, {9, 7, 128}}) {
          const auto x = random_floats(rng, tokens * heads * hd);
          const auto factors = random_floats(rng, hd / 2, 1.0f, 32.0f);
          std::vector<int32_t> pos(static_cast<size_t>(tokens));
          std::uniform_int_distribution<int32_t> p(0, 16383);
          for (auto& v : pos) v = p(rng);
          const float mscale = with_factors ? 1.0f : 1.25f;
          run(named_ops::RopeFreqFactors::name.data(),
              shape({{"tokens", tokens}, {"heads", heads}, {"head_dim", hd}, {"neox", neox}, {"factors", with_factors}}),
              "f32", kF32Tolerance, [&, tokens = tokens, heads = heads, hd = hd](Session& s) -> Result<std::vector<float>> {
                CONFORMANCE_ASSIGN(xd, s.put(x));
                CONFORMANCE_ASSIGN(fd, s.put(factors));
                named_ops::find<named_ops::RopeFreqFactors>(s.ops())(s.ops(), xd, pos.data(), tokens, heads, hd,
                                                                     500000.0f, neox, with_factors ? fd : nullptr,
                                                                     mscale);
                return s.get(xd, tokens * heads * hd);
              });
        }
  }

  // Gemma's named ops: the GELU-tanh gate, soft-capping (values far past the cap too), scaling;
  // GPT-2's plain GELU-tanh.
  void named_elementwise() {
    const bool gelu = both_offer<named_ops::GeluTanhMul>();
    const bool gelu_plain = both_offer<named_ops::GeluTanh>("gpt2 (examples/gpt2_model)");
    const bool cap = both_offer<named_ops::SoftCap>();
    const bool scale = both_offer<named_ops::Scale>();
    for (int64_t n : {1, 7, 4097, 40000}) {
      const auto a = random_floats(rng, n, -8, 8), b = random_floats(rng, n, -2, 2);
      const auto big = random_floats(rng, n, -200, 200);
      const std::string shp = shape({{"n", n}});
      if (gelu)
        run(named_ops::GeluTanhMul::name.data(), shp, "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
          CONFORMANCE_ASSIGN(ad, s.put(a));
          CONFORMANCE_ASSIGN(bd, s.put(b));
          CONFORMANCE_ASSIGN(out, s.scratch(n * 4));
          named_ops::find<named_ops::GeluTanhMul>(s.ops())(s.ops(), ad, bd, n, static_cast<float*>(out));
          return s.get(static_cast<float*>(out), n);
        });
      if (gelu_plain)
        run(named_ops::GeluTanh::name.data(), shp, "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
          CONFORMANCE_ASSIGN(ad, s.put(a));
          CONFORMANCE_ASSIGN(out, s.scratch(n * 4));
          named_ops::find<named_ops::GeluTanh>(s.ops())(s.ops(), ad, n, static_cast<float*>(out));
          return s.get(static_cast<float*>(out), n);
        });
      if (cap)
        for (float c : {30.0f, 50.0f})
          run(named_ops::SoftCap::name.data(), shp + " cap=" + std::to_string(static_cast<int>(c)), "f32",
              kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
                CONFORMANCE_ASSIGN(xd, s.put(big));
                named_ops::find<named_ops::SoftCap>(s.ops())(s.ops(), xd, n, c);
                return s.get(xd, n);
              });
      if (scale)
        run(named_ops::Scale::name.data(), shp, "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
          CONFORMANCE_ASSIGN(xd, s.put(a));
          named_ops::find<named_ops::Scale>(s.ops())(s.ops(), xd, n, 25.298221f);
          return s.get(xd, n);
        });
    }
  }

  void norms_and_elementwise() {
    if (wants("rms_norm"))
      for (auto [tokens, dim] : {std::pair<int64_t, int64_t>{1, 1}, {1, 64}, {3, 33}, {17, 288}}) {
        const auto x = random_floats(rng, tokens * dim, -3, 3), w = random_floats(rng, dim, 0.5f, 1.5f);
        run("rms_norm", shape({{"tokens", tokens}, {"dim", dim}}), "f32", kF32Tolerance,
            [&, tokens = tokens, dim = dim](Session& s) -> Result<std::vector<float>> {
              CONFORMANCE_ASSIGN(xd, s.put(x));
              CONFORMANCE_ASSIGN(wd, s.put(w));
              CONFORMANCE_ASSIGN(out, s.scratch(tokens * dim * 4));
              s.ops().rms_norm(xd, wd, tokens, dim, 1e-5f, static_cast<float*>(out));
              return s.get(static_cast<float*>(out), tokens * dim);
            });
      }
    if (wants("rope"))
      for (bool neox : {false, true})
        for (auto [tokens, heads, hd] : {std::tuple<int64_t, int, int>{1, 1, 2}, {5, 3, 64}, {9, 7, 128}}) {
          const auto x = random_floats(rng, tokens * heads * hd);
          std::vector<int32_t> pos(static_cast<size_t>(tokens));
          std::uniform_int_distribution<int32_t> p(0, 4095);
          for (auto& v : pos) v = p(rng);
          pos[0] = tokens > 1 ? 0 : 4095;  // the first position and the longest one the check uses
          run(neox ? "rope_neox" : "rope", shape({{"tokens", tokens}, {"heads", heads}, {"head_dim", hd}}), "f32",
              kF32Tolerance, [&, tokens = tokens, heads = heads, hd = hd](Session& s) -> Result<std::vector<float>> {
                CONFORMANCE_ASSIGN(xd, s.put(x));
                s.ops().rope(xd, pos.data(), tokens, heads, hd, 10000.0f, neox);
                return s.get(xd, tokens * heads * hd);
              });
        }
    for (int64_t n : {1, 7, 4097}) {
      const auto a = random_floats(rng, n, -6, 6), b = random_floats(rng, n, -2, 2);
      if (wants("silu_mul"))
        run("silu_mul", shape({{"n", n}}), "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
          CONFORMANCE_ASSIGN(ad, s.put(a));
          CONFORMANCE_ASSIGN(bd, s.put(b));
          CONFORMANCE_ASSIGN(out, s.scratch(n * 4));
          s.ops().silu_mul(ad, bd, n, static_cast<float*>(out));
          return s.get(static_cast<float*>(out), n);
        });
      if (wants("add_inplace"))
        run("add_inplace", shape({{"n", n}}), "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
          CONFORMANCE_ASSIGN(ad, s.put(a));
          CONFORMANCE_ASSIGN(bd, s.put(b));
          s.ops().add_inplace(ad, bd, n);
          return s.get(ad, n);
        });
      if (wants("gelu"))
        run("gelu", shape({{"n", n}}), "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
          CONFORMANCE_ASSIGN(ad, s.put(a));
          CONFORMANCE_ASSIGN(out, s.scratch(n * 4));
          s.ops().gelu(ad, n, static_cast<float*>(out));
          return s.get(static_cast<float*>(out), n);
        });
    }
    for (auto [tokens, dim] : {std::pair<int64_t, int64_t>{1, 1}, {3, 33}, {9, 384}}) {
      const auto x = random_floats(rng, tokens * dim, -3, 3), w = random_floats(rng, dim, 0.5f, 1.5f),
                 bias = random_floats(rng, dim);
      for (bool with_bias : {true, false}) {
        if (!wants("layer_norm")) break;
        run("layer_norm", shape({{"tokens", tokens}, {"dim", dim}, {"bias", with_bias}}), "f32", kF32Tolerance,
            [&, tokens = tokens, dim = dim](Session& s) -> Result<std::vector<float>> {
              CONFORMANCE_ASSIGN(xd, s.put(x));
              CONFORMANCE_ASSIGN(wd, s.put(w));
              CONFORMANCE_ASSIGN(bd, s.put(bias));
              CONFORMANCE_ASSIGN(out, s.scratch(tokens * dim * 4));
              s.ops().layer_norm(xd, wd, with_bias ? bd : nullptr, tokens, dim, 1e-12f, static_cast<float*>(out));
              return s.get(static_cast<float*>(out), tokens * dim);
            });
      }
      if (wants("add_bias"))
        run("add_bias", shape({{"tokens", tokens}, {"dim", dim}}), "f32", kF32Tolerance,
            [&, tokens = tokens, dim = dim](Session& s) -> Result<std::vector<float>> {
              CONFORMANCE_ASSIGN(xd, s.put(x));
              CONFORMANCE_ASSIGN(bd, s.put(bias));
              s.ops().add_bias(xd, bd, tokens, dim);
              return s.get(xd, tokens * dim);
            });
    }
  }

  void dense_attention() {
    if (!wants("dense_attention")) return;
    for (const std::vector<int32_t>& lens : {std::vector<int32_t>{1}, std::vector<int32_t>{5, 17, 1}})
      for (bool causal : {true, false}) {
        const int heads = 3, hd = 16;
        std::vector<int32_t> starts = {0};
        for (int32_t l : lens) starts.push_back(starts.back() + l);
        const int64_t n = int64_t{starts.back()} * heads * hd;
        const auto q = random_floats(rng, n), k = random_floats(rng, n), v = random_floats(rng, n);
        run("dense_attention",
            shape({{"seqs", static_cast<int64_t>(lens.size())}, {"tokens", starts.back()}, {"heads", heads},
                   {"head_dim", hd}, {"causal", causal}}),
            "f32", kF32Tolerance, [&](Session& s) -> Result<std::vector<float>> {
              CONFORMANCE_ASSIGN(qd, s.put(q));
              CONFORMANCE_ASSIGN(kd, s.put(k));
              CONFORMANCE_ASSIGN(vd, s.put(v));
              CONFORMANCE_ASSIGN(out, s.scratch(n * 4));
              s.ops().dense_attention(qd, kd, vd, static_cast<float*>(out), starts.data(),
                                      static_cast<int>(lens.size()), heads, hd, 0.25f, causal);
              return s.get(static_cast<float*>(out), n);
            });
      }
  }
};

}  // namespace

void measure_speeds(Session& target, Session& reference, const std::vector<DType>& types, const Options& options,
                    Report* report);

std::vector<DType> common_weight_types(const Platform& target, const Platform& reference) {
  std::vector<DType> out;
  const auto mine = target.supported_quantizations();
  for (const auto& name : reference.supported_quantizations()) {
    if (std::find(mine.begin(), mine.end(), name) == mine.end()) continue;
    for (uint32_t id = 0; id < 256; ++id) {
      auto tr = dtype_traits(id);
      if (tr && tr->name == name) out.push_back(static_cast<DType>(id));
    }
  }
  return out;
}

void check_kernels(const Platform& target, const Platform& reference, const Options& options, Report* report) {
  report->platform = target.device_type();
  report->reference = reference.device_type();
  auto t = Session::open(target, options.num_threads);
  auto r = Session::open(reference, options.num_threads);
  if (!t.ok() || !r.ok()) {
    CaseResult c;
    c.group = "ops";
    c.op = "make_ops";
    c.outcome = Outcome::fail;
    c.detail = !t.ok() ? "platform " + target.device_type() + ": " + t.status().to_string()
                       : "reference " + reference.device_type() + ": " + r.status().to_string();
    report->cases.push_back(std::move(c));
    return;
  }
  Rng rng(options.seed);
  Checker k{**t, **r, options, rng, report, {}};
  for (DType d : common_weight_types(target, reference)) {
    if (random_weight(rng, d, 1, block_elems(d)).ok())
      k.types.push_back(d);
    else
      report->notes.push_back("weight type " + std::string(to_string(d)) +
                              " is claimed by both but not checked: the check cannot make weights of it");
  }
  std::string names;
  for (DType d : k.types) {
    if (!names.empty()) names += ", ";
    names += to_string(d);
  }
  report->notes.push_back("weight types checked (claimed by both " + target.device_type() + " and " +
                          reference.device_type() + "): " + (names.empty() ? "none" : names));
  k.matmuls();
  check_weight_formats(**t, options, rng, report);
  k.norms_and_elementwise();
  k.named_elementwise();
  check_moe_ops(**t, **r, k.types, options, rng, report);
  k.rope_with_factors();
  k.dense_attention();
  check_token_selection(**t, **r, options, rng, report);
  check_attention(**t, **r, options, rng, report);
  check_communicator(**t, **r, options, rng, report);
  if (options.measure_speed) measure_speeds(**t, **r, k.types, options, report);
}

}  // namespace troupe::conformance
