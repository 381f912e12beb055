// troupe_bench_kernels: matmul per weight type at SmolLM2-135M shapes, for
// decode (n_tokens = 1) and batches, reported as GB/s of weight bytes and as a
// fraction of the streaming-read bandwidth measured in the same run (ratios,
// not absolute times, are what compare across runs on a shared machine).
//
// Weights are replicated until they exceed the last-level cache many times
// over and each iteration uses the next copy, so they stream from DRAM as in
// a real model instead of sitting in L3.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.hpp"

namespace troupe::kernels::cpu {
namespace {

// Weight bytes to cycle through: 6x a 32 MiB L3 unless TROUPE_BENCH_WEIGHT_MB says
// otherwise (a small value keeps weights in cache: compute-bound speed).
int64_t min_weight_bytes() {
  const char* env = std::getenv("TROUPE_BENCH_WEIGHT_MB");
  return (env != nullptr ? std::atoll(env) : 192) << 20;
}

std::map<int, double>& bandwidth_gbs() {  // threads -> GB/s
  static std::map<int, double> bw;
  return bw;
}

ThreadPool* pool_for(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return p.get();
}

struct Weights {
  std::vector<uint8_t> data;  // `copies` back-to-back copies of one matrix
  int64_t bytes = 0;          // one copy
  int64_t copies = 0;
};

const Weights& weights(DType type, int64_t in, int64_t out) {
  static std::map<std::tuple<int, int64_t, int64_t>, Weights> cache;
  auto key = std::make_tuple(static_cast<int>(type), in, out);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  cache.clear();  // keep one matrix set alive at a time
  Weights w;
  w.bytes = row_bytes(type, in) * out;
  w.copies = std::max<int64_t>(1, (min_weight_bytes() + w.bytes - 1) / w.bytes);
  w.data.resize(static_cast<size_t>(w.bytes * w.copies));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(in));
  const int64_t rb = row_bytes(type, in);
  for (int64_t o = 0; o < out; ++o) {
    for (auto& v : row) v = dist(rng);
    quantize_row_reference(type, row.data(), w.data.data() + o * rb, in);
  }
  for (int64_t c = 1; c < w.copies; ++c)
    std::copy(w.data.begin(), w.data.begin() + w.bytes, w.data.begin() + c * w.bytes);
  return cache.emplace(key, std::move(w)).first->second;
}

void BM_Matmul(benchmark::State& state, DType type, int64_t in, int64_t out) {
  const int64_t n_tokens = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const Weights& w = weights(type, in, out);
  std::vector<float> x(static_cast<size_t>(in * n_tokens)), y(static_cast<size_t>(out * n_tokens));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  ThreadPool* pool = pool_for(threads);
  int64_t copy = 0;
  for (auto _ : state) {
    matmul(type, w.data.data() + copy * w.bytes, in, out, x.data(), n_tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % w.copies;
  }
  const double bytes = static_cast<double>(w.bytes);
  const double bw = bandwidth_gbs()[threads] * 1e9;
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bw_frac"] = benchmark::Counter(bytes / bw, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(in * out * n_tokens) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  double gbs = 0;
  for (auto _ : state) gbs = measure_read_bandwidth_gbs(pool_for(threads));
  state.counters["GB/s"] = gbs;
}

void register_all() {
  struct Shape {
    const char* name;
    int64_t in, out;
  };
  const Shape shapes[] = {{"576x1536", 576, 1536}, {"1536x576", 1536, 576}, {"576x49152", 576, 49152}};
  struct TypeSet {
    DType type;
    bool full;  // every batch size and thread count, or a reduced set
  };
  const TypeSet types[] = {{DType::q4_1, true},  {DType::q8_0, true},  {DType::q4_0, false},
                           {DType::q5_1, false}, {DType::q4_k, false}, {DType::q6_k, false},
                           {DType::q2_k, false}, {DType::q3_k, false}, {DType::q5_k, false},
                           {DType::iq4_nl, false}, {DType::iq4_xs, false}, {DType::f16, false},
                           {DType::f32, false}};
  for (const auto& t : types) {
    for (const auto& s : shapes) {
      if (s.in % traits(t.type).block_elems != 0) continue;
      const std::string name = std::string("matmul/") + std::string(to_string(t.type)) + "/" + s.name;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t.type, s.in, s.out);
      b->ArgNames({"tokens", "threads"})->UseRealTime()->MinTime(0.3)->Unit(benchmark::kMicrosecond);
      if (t.full) {
        for (int threads : {1, 2})
          for (int64_t n : {1, 2, 3, 4, 6, 8, 12, 16, 32, 128}) b->Args({n, threads});
      } else {
        for (int64_t n : {1, 32}) b->Args({n, 2});
      }
    }
  }
  // Llama-3.2-1B's attention/FFN shapes for the types of the files people download
  // (Q4_K_M mixes q4_k and q6_k, Q5_K_M q5_k and q6_k): decode, small batches and prefill.
  // Decode also on one thread (the kernel's rate with the other core idle), and
  // attention-sized (2048x2048) and the output head (2048x128256) matrices.
  const Shape shapes_1b[] = {{"2048x8192", 2048, 8192}, {"8192x2048", 8192, 2048}, {"2048x2048", 2048, 2048},
                             {"2048x128256", 2048, 128256}};
  for (DType type : {DType::q4_k, DType::q5_k, DType::q6_k, DType::q4_0, DType::q5_0}) {
    for (const auto& s : shapes_1b) {
      const bool head = s.out > 100000;
      if (head && type != DType::q6_k && type != DType::q4_k) continue;  // the heads of Q4_K_M and Q4_K_S files
      const std::string name = std::string("matmul/") + std::string(to_string(type)) + "/" + s.name;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, type, s.in, s.out);
      b->ArgNames({"tokens", "threads"})->UseRealTime()->MinTime(0.3)->Unit(benchmark::kMicrosecond);
      b->Args({1, 1});
      for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128}) {
        if (head && n > 4) break;
        b->Args({n, 2});
      }
      if (!head) b->Args({32, 1});  // one thread: CPU time per call is the kernel's, even on a busy machine
    }
  }
  // Llama-3.2-1B's shapes for Q8_0 and IQ4_NL, and for the small-memory files' types (Q3_K_M
  // mixes q3_k with q4_k, q5_k and q6_k; Q2_K and IQ4_XS files): decode, a small batch and
  // prefill, one thread and two.
  const Shape shapes_1b_sq[] = {{"2048x2048", 2048, 2048}, {"2048x8192", 2048, 8192}, {"8192x2048", 8192, 2048}};
  for (DType type : {DType::q8_0, DType::iq4_nl, DType::q3_k, DType::iq4_xs, DType::q2_k}) {
    for (const auto& s : shapes_1b_sq) {
      const std::string name = std::string("matmul/") + std::string(to_string(type)) + "/" + s.name;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, type, s.in, s.out);
      b->ArgNames({"tokens", "threads"})->UseRealTime()->MinTime(0.3)->Unit(benchmark::kMicrosecond);
      for (int threads : {1, 2})
        for (int64_t n : {1, 8, 32, 128}) b->Args({n, threads});
    }
  }
  benchmark::RegisterBenchmark("read_bandwidth", BM_ReadBandwidth)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime();
}

}  // namespace
}  // namespace troupe::kernels::cpu

int main(int argc, char** argv) {
  using namespace troupe::kernels::cpu;
  for (int threads : {1, 2}) bandwidth_gbs()[threads] = measure_read_bandwidth_gbs(pool_for(threads));
  std::printf("kernels isa: %s; streaming read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (2 threads)\n",
              isa_name(), bandwidth_gbs()[1], bandwidth_gbs()[2]);
  std::printf("bw_frac = weight bytes per second / that bandwidth at the same thread count\n");
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
