// A speed line per op: one representative shape, on the target and on the
// reference, in GB/s of the bytes the op must move (or GFLOP/s where compute
// bounds it). Shown for orientation; nothing passes or fails on it.
#include <functional>
#include <string>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"

namespace troupe::conformance {

namespace {

/// Sets up an op in `s` and returns the function that runs it once, or an error.
using Setup = std::function<Result<std::function<void()>>(Session&)>;

double rate(Session& s, const Setup& setup, double units_per_run, std::string* error) {
  auto op = setup(s);
  if (!op.ok()) {
    *error = op.status().message();
    return 0;
  }
  auto probe = s.scratch(4);
  if (!probe.ok()) {
    *error = probe.status().message();
    return 0;
  }
  float host = 0;
  void* dev = *probe;
  const double per_second = runs_per_second(*op, [&] { (void)s.get_bytes(&host, dev, 4); });
  s.clear();
  return per_second * units_per_run / 1e9;
}

}  // namespace

void measure_speeds(Session& target, Session& reference, const std::vector<DType>& types, const Options& options,
                    Report* report) {
  Rng rng(options.seed + 1);
  auto line = [&](const char* op, std::string shape, std::string dtype, const char* unit, double units,
                  const Setup& setup) {
    if (!selected(options, "ops", op) && !selected(options, "attention", op)) return;
    std::string e1, e2;
    SpeedResult r{op, std::move(shape), std::move(dtype), unit, rate(target, setup, units, &e1),
                  rate(reference, setup, units, &e2)};
    if (!e1.empty() || !e2.empty()) {
      report->notes.push_back(std::string("speed of ") + op + " not measured: " + (e1.empty() ? e2 : e1));
      return;
    }
    report->speeds.push_back(std::move(r));
  };

  const int64_t in = 1024, out = 1024;
  for (DType t : types) {
    auto w = random_weight(rng, t, out, in);
    if (!w.ok()) continue;
    const auto x = random_floats(rng, in);
    const double bytes = static_cast<double>(w->size()) + 4.0 * (in + out);
    line("matmul", "in=1024 out=1024 tokens=1", std::string(to_string(t)), "GB/s", bytes,
         [&, t](Session& s) -> Result<std::function<void()>> {
           CONFORMANCE_ASSIGN(wd, s.put(w->data(), static_cast<int64_t>(w->size())));
           CONFORMANCE_ASSIGN(xd, s.put(x));
           CONFORMANCE_ASSIGN(y, s.scratch(out * 4));
           WeightTensor wt;
           wt.type = t;
           wt.n_dims = 2;
           wt.ne[0] = in;
           wt.ne[1] = out;
           wt.data = wd;
           wt.nbytes = w->size();
           Ops* ops = &s.ops();
           return std::function<void()>([ops, wt, xd, y] { ops->matmul(wt, xd, 1, static_cast<float*>(y)); });
         });
  }
  if (!types.empty() && types.front() == DType::f32) {
    constexpr int64_t T = 32;
    auto w = random_weight(rng, DType::f32, out, in);
    const auto x = random_floats(rng, T * in);
    line("matmul", "in=1024 out=1024 tokens=32", "f32", "GFLOP/s", 2.0 * T * in * out,
         [&](Session& s) -> Result<std::function<void()>> {
           CONFORMANCE_ASSIGN(wd, s.put(w->data(), static_cast<int64_t>(w->size())));
           CONFORMANCE_ASSIGN(xd, s.put(x));
           CONFORMANCE_ASSIGN(y, s.scratch(T * out * 4));
           WeightTensor wt;
           wt.ne[0] = in;
           wt.ne[1] = out;
           wt.n_dims = 2;
           wt.data = wd;
           wt.nbytes = w->size();
           Ops* ops = &s.ops();
           return std::function<void()>([ops, wt, xd, y, T] { ops->matmul(wt, xd, T, static_cast<float*>(y)); });
         });
  }

  constexpr int64_t T = 64, dim = 1024, n = T * dim;
  const auto a = random_floats(rng, n), b = random_floats(rng, n), wv = random_floats(rng, dim, 0.5f, 1.5f);
  // Element-wise ops: (op, bytes moved per element, how to run it on device buffers a, b, out).
  using Elementwise = std::function<void(Ops&, float*, float*, float*, float*)>;
  const std::vector<std::tuple<const char*, double, Elementwise>> elementwise = {
      {"rms_norm", 8, [](Ops& o, float* x, float*, float* w, float* y) { o.rms_norm(x, w, T, dim, 1e-5f, y); }},
      {"rope", 8, [](Ops& o, float* x, float*, float*, float*) {
         static const std::vector<int32_t> pos = [] {
           std::vector<int32_t> p(T);
           for (int i = 0; i < T; ++i) p[static_cast<size_t>(i)] = 100 + i;
           return p;
         }();
         o.rope(x, pos.data(), T, 16, 64, 10000.0f, false);
       }},
      {"silu_mul", 12, [](Ops& o, float* x, float* u, float*, float* y) { o.silu_mul(x, u, n, y); }},
      {"add_inplace", 12, [](Ops& o, float* x, float* u, float*, float*) { o.add_inplace(x, u, n); }},
      {"layer_norm", 8, [](Ops& o, float* x, float*, float* w, float* y) { o.layer_norm(x, w, w, T, dim, 1e-5f, y); }},
      {"gelu", 8, [](Ops& o, float* x, float*, float*, float* y) { o.gelu(x, n, y); }},
      {"add_bias", 8, [](Ops& o, float* x, float*, float* w, float*) { o.add_bias(x, w, T, dim); }},
  };
  for (const auto& [op, bytes_per, fn] : elementwise) {
    const Elementwise run = fn;
    line(op, "tokens=64 dim=1024", "f32", "GB/s", bytes_per * static_cast<double>(n),
         [&, run](Session& s) -> Result<std::function<void()>> {
           CONFORMANCE_ASSIGN(ad, s.put(a));
           CONFORMANCE_ASSIGN(bd, s.put(b));
           CONFORMANCE_ASSIGN(wd, s.put(wv));
           CONFORMANCE_ASSIGN(y, s.scratch(n * 4));
           Ops* ops = &s.ops();
           return std::function<void()>(
               [ops, run, ad, bd, wd, y] { run(*ops, ad, bd, wd, static_cast<float*>(y)); });
         });
  }
  {
    constexpr int64_t rows = 4096, edim = 1024, ids_n = 64;
    auto w = random_weight(rng, DType::f32, rows, edim);
    std::vector<int32_t> ids(ids_n);
    for (int64_t i = 0; i < ids_n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 61) % rows);
    line("embedding", "rows=4096 dim=1024 ids=64", "f32", "GB/s", 8.0 * ids_n * edim,
         [&](Session& s) -> Result<std::function<void()>> {
           CONFORMANCE_ASSIGN(wd, s.put(w->data(), static_cast<int64_t>(w->size())));
           CONFORMANCE_ASSIGN(y, s.scratch(ids_n * edim * 4));
           WeightTensor wt;
           wt.ne[0] = edim;
           wt.ne[1] = rows;
           wt.n_dims = 2;
           wt.data = wd;
           wt.nbytes = w->size();
           Ops* ops = &s.ops();
           const int32_t* idp = ids.data();
           return std::function<void()>([ops, wt, idp, y, ids_n] { ops->embedding(wt, idp, ids_n, static_cast<float*>(y)); });
         });
  }
  {
    const int64_t L = 256, heads = 4, hd = 64, elems = L * heads * hd;
    const auto q = random_floats(rng, elems);
    static const std::vector<int32_t> starts = {0, static_cast<int32_t>(L)};
    line("dense_attention", "tokens=256 heads=4 head_dim=64 causal", "f32", "GFLOP/s",
         2.0 * 2.0 * static_cast<double>(L * L / 2 * heads * hd), [&](Session& s) -> Result<std::function<void()>> {
           CONFORMANCE_ASSIGN(qd, s.put(q));
           CONFORMANCE_ASSIGN(y, s.scratch(elems * 4));
           Ops* ops = &s.ops();
           return std::function<void()>([ops, qd, y] {
             ops->dense_attention(qd, qd, qd, static_cast<float*>(y), starts.data(), 1, heads, hd, 0.125f, true);
           });
         });
  }
}

}  // namespace troupe::conformance
