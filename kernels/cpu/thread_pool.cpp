#include "kernels/cpu/thread_pool.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TROUPE_CPU_RELAX() _mm_pause()
#else
#define TROUPE_CPU_RELAX() std::this_thread::yield()
#endif

namespace troupe::kernels::cpu {
namespace {

// Spin iterations (each a pause, ~tens of ns) before a worker sleeps: about
// 0.5-2 ms, longer than the gap between two matmuls of one decode step.
constexpr int kSpinBeforeSleep = 30000;

constexpr uint64_t pack(uint32_t gen, uint32_t chunks, uint32_t next) {
  return (static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(chunks) << 16) | next;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : size_(std::max(1, num_threads)) {
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  gen_.fetch_add(1);
  wake_sleepers();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::run_chunks(uint32_t gen) {
  bool ran = false;
  uint64_t word = job_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t g = static_cast<uint32_t>(word >> 32);
    const uint32_t chunks = static_cast<uint32_t>((word >> 16) & 0xffff);
    const uint32_t next = static_cast<uint32_t>(word & 0xffff);
    if (g != gen || next >= chunks) return ran;
    if (!job_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    // Chunk `next` of job `gen` is ours: the caller cannot return (and so fn_
    // and n_ stay valid) until we count it done.
    const int64_t begin = n_ * next / chunks;
    const int64_t end = n_ * (next + 1) / chunks;
    if (begin < end) (*fn_)(begin, end);
    done_chunks_.fetch_add(1, std::memory_order_release);
    ran = true;
    word = job_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  // Generation 0 is the constructor's: a worker that starts late must still
  // notice every later job (and the destructor's bump).
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t g;
    while ((g = gen_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinBeforeSleep) {
        TROUPE_CPU_RELAX();
        continue;
      }
      std::unique_lock<std::mutex> lock(sleep_mu_);
      sleepers_.fetch_add(1);  // seq_cst: pairs with the publisher's gen_ store
      sleep_cv_.wait(lock, [&] { return gen_.load() != seen; });
      sleepers_.fetch_sub(1);
      spins = 0;
    }
    seen = g;
    if (stop_.load()) return;
    run_chunks(g);
  }
}

void ThreadPool::wake_sleepers() {
  {
    // Taking the lock orders us after a worker's check-then-wait.
    std::lock_guard<std::mutex> lock(sleep_mu_);
  }
  sleep_cv_.notify_all();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t chunks = std::min<int64_t>(n, int64_t{size_} * kChunksPerThread);
  if (chunks <= 1 || size_ == 1) {
    fn(0, n);
    return;
  }
  bool expected = false;
  while (!busy_.compare_exchange_weak(expected, true, std::memory_order_acquire)) {
    expected = false;
    std::this_thread::yield();
  }
  fn_ = &fn;
  n_ = n;
  done_chunks_.store(0, std::memory_order_relaxed);
  const uint32_t gen = gen_.load(std::memory_order_relaxed) + 1;
  job_.store(pack(gen, static_cast<uint32_t>(chunks), 0), std::memory_order_release);
  gen_.store(gen);  // seq_cst: pairs with the sleepers_ check below
  if (sleepers_.load() > 0) wake_sleepers();

  run_chunks(gen);
  int spins = 0;
  while (done_chunks_.load(std::memory_order_acquire) < chunks) {
    if (++spins < 4096) {
      TROUPE_CPU_RELAX();
    } else {
      std::this_thread::yield();  // a worker was descheduled mid-chunk
    }
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace troupe::kernels::cpu
