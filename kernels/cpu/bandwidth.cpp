#include "kernels/cpu/bandwidth.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kBufferBytes = int64_t{128} << 20;  // 4x a 32 MiB L3
constexpr int kRepeats = 5;

uint64_t sum_range(const uint64_t* p, int64_t n) {
  // Four independent sums so the loop is load-bound, not add-latency-bound.
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const int64_t groups = n / 4;
  for (int64_t g = 0; g < groups; ++g) {
    const uint64_t* q = p + 4 * g;
    s0 += q[0], s1 += q[1], s2 += q[2], s3 += q[3];
  }
  for (int64_t i = 4 * groups; i < n; ++i) s0 += p[i];
  return s0 ^ s1 ^ s2 ^ s3;
}

}  // namespace

double measure_read_bandwidth_gbs(ThreadPool* pool) {
  const int64_t n = kBufferBytes / 8;
  std::unique_ptr<uint64_t[]> buf(new uint64_t[static_cast<size_t>(n)]);
  for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  std::atomic<uint64_t> sink{0};
  const int threads = pool != nullptr ? pool->size() : 1;
  auto pass = [&] {
    if (threads > 1) {
      pool->parallel_for(threads, [&](int64_t b, int64_t e) {
        sink.fetch_xor(sum_range(buf.get() + n * b / threads, n * e / threads - n * b / threads),
                       std::memory_order_relaxed);
      });
    } else {
      sink.fetch_xor(sum_range(buf.get(), n), std::memory_order_relaxed);
    }
  };
  pass();  // warm: page tables, worker wake-up
  double best = 0.0;
  for (int r = 0; r < kRepeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(kBufferBytes) / s / 1e9);
  }
  return best;
}

}  // namespace troupe::kernels::cpu
