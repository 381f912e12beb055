// troupe_bench_bounds MODEL.gguf [--threads N] [--json FILE]
//
// The two ceilings bench/compare.sh measures every figure against, taken in
// the same run as the figures:
//  - streaming-read bandwidth over a buffer of the model's weight bytes per
//    decoded token (and over kernels/cpu/bandwidth's fixed 128 MiB), and those
//    bytes: decode tok/s <= bandwidth / bytes;
//  - the peak integer multiply-add rate of the AVX2 int8 dot sequences (and,
//    where the CPU has them, AVX-512 VNNI, 512-bit vpdpwssd for troupe's
//    avx512_vnni kernels, and AMX-INT8), on all N threads at
//    once, and the model's multiply-adds per token: batched tok/s <= peak / MACs.
// Bytes and MACs come from the GGUF's tensor table: every tensor but the token
// embedding (one row of it per token), plus the embedding again when the
// output head is tied to it; of a mixture of experts' merged expert tensors, the
// share of the experts a token uses (expert_used_count of expert_count). MACs count the matrix multiplications only
// (attention scores and values, a few percent here, are left out, so the
// bound is a little loose).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bounds/mac_peak.hpp"
#include "kernels/cpu/bandwidth.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "troupe/dtype.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace cpu = troupe::kernels::cpu;

struct ModelCost {
  double bytes_per_token = 0;      // weights read by one decode step
  double body_macs_per_token = 0;  // the blocks' matmuls (what every prompt token costs)
  double head_macs_per_token = 0;  // the output head (only tokens whose logits are wanted)
};

ModelCost model_cost(const troupe::gguf::GgufFile& f) {
  ModelCost c;
  const troupe::WeightTensor* emb = f.tensor("token_embd.weight");
  const troupe::WeightTensor* head = f.tensor("output.weight");
  // A mixture of experts reads only the experts a token chose: expert_used_count of the
  // expert_count experts of each merged expert tensor (and of its bias).
  const std::string arch = f.get_string("general.architecture").value_or("");
  const double used = static_cast<double>(f.get_int(arch + ".expert_used_count").value_or(0));
  for (const auto& t : f.tensors()) {
    if (&t == emb) continue;
    const bool experts = used > 0 && t.name.find("_exps.") != std::string::npos;
    const double n_experts = static_cast<double>(t.n_dims == 3 ? t.ne[2] : t.ne[1]);
    c.bytes_per_token += static_cast<double>(t.nbytes) * (experts ? used / n_experts : 1.0);
    if ((t.n_dims == 2 || (experts && t.n_dims == 3)) && t.name.rfind("blk.", 0) == 0 &&
        t.name.find(".bias") == std::string::npos)
      c.body_macs_per_token += static_cast<double>(t.ne[0]) * static_cast<double>(t.ne[1]) * (experts ? used : 1.0);
  }
  if (emb != nullptr) {
    c.bytes_per_token += static_cast<double>(troupe::row_bytes(emb->type, emb->ne[0]));
    if (head == nullptr) c.bytes_per_token += static_cast<double>(emb->nbytes);
  }
  if (const troupe::WeightTensor* h = head != nullptr ? head : emb)
    c.head_macs_per_token = static_cast<double>(h->ne[0]) * static_cast<double>(h->ne[1]);
  return c;
}

// Best GB/s of reading `bytes` (the model's weight bytes per token) again and
// again, split over the pool as a decode step splits its matmuls: the bound a
// decode step meets whatever the cache holds of those bytes. (kernels/cpu's
// bandwidth reads a fixed 128 MiB; caches larger than that make the two differ.)
double model_read_bandwidth_gbs(cpu::ThreadPool& pool, double bytes) {
  const int64_t n = std::max<int64_t>(1 << 20, static_cast<int64_t>(bytes) / 8);
  std::vector<uint64_t> buf(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  const int threads = pool.size();
  std::atomic<uint64_t> sink{0};
  auto pass = [&] {
    pool.parallel_for(threads, [&](int64_t b, int64_t e) {
      const uint64_t* p = buf.data() + n * b / threads;
      const int64_t len = n * e / threads - n * b / threads;
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = 0; i + 4 <= len; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
      sink.fetch_xor(s0 ^ s1 ^ s2 ^ s3, std::memory_order_relaxed);
    });
  };
  pass();
  double best = 0;
  for (int r = 0; r < 10; ++r) {
    const auto t0 = Clock::now();
    pass();
    best = std::max(best, static_cast<double>(n) * 8 / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  if (sink.load() == 42) std::printf(" ");
  return best;
}

// CPU seconds this process has used (all threads).
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Share of `threads` whole CPUs the process got from `cpu0`/`wall0` until now:
// below 1 when other work on the machine took some of them.
struct Share {
  double cpu0 = process_cpu_s();
  Clock::time_point wall0 = Clock::now();
  double of(int threads) const {
    const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
    return wall > 0 ? (process_cpu_s() - cpu0) / (wall * threads) : 0.0;
  }
};

// GMAC/s of `loop` run on every thread of the pool at once; best of a few tries.
double peak_gmacs(cpu::ThreadPool& pool, int64_t (*loop)(int64_t), int64_t (*macs)(int64_t)) {
  const int threads = pool.size();
  int64_t iters = 1 << 16;
  std::atomic<int64_t> sink{0};
  auto run = [&](int64_t n) {
    const auto t0 = Clock::now();
    pool.parallel_for(threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sink.fetch_add(loop(n), std::memory_order_relaxed);
    });
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  while (run(iters) < 0.05 && iters < (int64_t{1} << 40)) iters *= 2;  // ~50 ms per try
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double s = run(iters);
    best = std::max(best, static_cast<double>(macs(iters)) * threads / s / 1e9);
  }
  if (sink.load() == 42) std::printf(" ");  // keep the checksum alive
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe_bench_bounds: read bandwidth, int8 multiply-add peak and the model's bytes/MACs per token"};
  std::string model, json_path;
  int threads = 1;
  app.add_option("model", model, "GGUF model")->required();
  app.add_option("--threads", threads, "threads measured at once (default 1)");
  app.add_option("--json", json_path, "also write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);
  if (threads < 1) {
    std::fprintf(stderr, "troupe_bench_bounds: --threads must be >= 1\n");
    return 2;
  }
  auto file = troupe::gguf::GgufFile::open(model);
  if (!file.ok()) {
    std::fprintf(stderr, "troupe_bench_bounds: %s\n", file.status().to_string().c_str());
    return 1;
  }
  const ModelCost cost = model_cost(**file);

  cpu::ThreadPool pool(threads);
  const double bw = cpu::measure_read_bandwidth_gbs(&pool);
  const double model_bw = model_read_bandwidth_gbs(pool, cost.bytes_per_token);
  nlohmann::json j = {{"model", model},
                      {"threads", threads},
                      {"isa", cpu::isa_name()},
                      {"read_bandwidth_gbs", bw},
                      {"model_read_bandwidth_gbs", model_bw},
                      {"bytes_per_token", cost.bytes_per_token},
                      {"body_macs_per_token", cost.body_macs_per_token},
                      {"head_macs_per_token", cost.head_macs_per_token}};
  std::printf("model %s: %.1f MB of weights per decoded token, %.1f M multiply-adds per token (+%.1f M for logits)\n",
              model.c_str(), cost.bytes_per_token / 1e6, cost.body_macs_per_token / 1e6, cost.head_macs_per_token / 1e6);
  std::printf("streaming read bandwidth, %d threads: %.1f GB/s over 128 MiB, %.1f GB/s over the model's %.1f MB\n",
              threads, bw, model_bw, cost.bytes_per_token / 1e6);
#if defined(TROUPE_BENCH_HAVE_AVX2)
  if (cpu::isa_available(cpu::Isa::avx2)) {
    namespace tb = troupe::bench;
    Share mac_share;
    const double ubs = peak_gmacs(pool, tb::mac_peak_maddubs, tb::mac_peak_macs);
    const double wd = peak_gmacs(pool, tb::mac_peak_maddwd, tb::mac_peak_macs);
    const double i16 = peak_gmacs(pool, tb::mac_peak_maddubs_i16, tb::mac_peak_macs);
    const double mac_cpu_share = mac_share.of(threads);
    j["int8_peak_cpu_share"] = mac_cpu_share;
    j["int8_peak_gmacs_maddubs"] = ubs;
    j["int8_peak_gmacs_maddwd"] = wd;
    j["int8_peak_gmacs"] = std::max(ubs, wd);
    // troupe's plain-AVX2 batched kernels add vpmaddubsw pair sums in int16 over a
    // block's runs: their ceiling, above the vpmaddubsw+vpmaddwd sequence.
    j["int8_peak_gmacs_maddubs_i16"] = i16;
    std::printf("AVX2 integer multiply-add peak, %d threads: %.1f GMAC/s (vpmaddubsw+vpmaddwd), %.1f GMAC/s "
                "(vpmaddubsw+vpaddw, int16 sums), %.1f GMAC/s (vpmaddwd on 16-bit) (the process got %.0f%% of "
                "%d CPUs meanwhile)\n",
                threads, ubs, i16, wd, 100 * mac_cpu_share, threads);
#if defined(TROUPE_BENCH_HAVE_X86_EXT)
    // Wider integer units llama.cpp's native build uses where the CPU has them.
    if (tb::have_avx512_vnni()) {
      const double v256 = peak_gmacs(pool, tb::mac_peak_vnni256, tb::mac_peak_vnni256_macs);
      const double v512 = peak_gmacs(pool, tb::mac_peak_vnni512, tb::mac_peak_vnni512_macs);
      const double w512 = peak_gmacs(pool, tb::mac_peak_wssd512, tb::mac_peak_wssd512_macs);
      j["int8_peak_gmacs_vnni256"] = v256;
      j["int8_peak_gmacs_vnni512"] = v512;
      j["int8_peak_gmacs_wssd512"] = w512;  // troupe's batched kernels under Isa::avx512_vnni
      std::printf("VNNI multiply-add peak, %d threads: %.1f GMAC/s (vpdpbusd ymm), %.1f GMAC/s (vpdpbusd zmm), "
                  "%.1f GMAC/s (vpdpwssd zmm on 16-bit)\n",
                  threads, v256, v512, w512);
    }
    if (tb::have_amx_int8()) {
      const double v = peak_gmacs(pool, tb::mac_peak_amx, tb::mac_peak_amx_macs);
      j["int8_peak_gmacs_amx"] = v;
      std::printf("AMX-INT8 multiply-add peak, %d threads: %.1f GMAC/s (tdpbusd)\n", threads, v);
    }
#endif
  } else {
    std::printf("no AVX2 on this CPU: no integer multiply-add peak measured\n");
  }
#else
  std::printf("not an x86-64 build: no integer multiply-add peak measured\n");
#endif
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "troupe_bench_bounds: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
