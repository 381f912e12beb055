// A small persistent thread pool for the kernels: the caller takes part, idle
// workers spin briefly before sleeping (decode issues hundreds of tiny
// parallel_for calls per token, so a wake-up must cost microseconds, not a
// futex round trip each time).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::kernels::cpu {

class ThreadPool {
 public:
  /// num_threads = total threads including the caller (values < 1 mean 1).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  /// Chunks per thread of one parallel_for. More would let a descheduled thread
  /// hold up less of a call on a shared machine, but cost more than they save:
  /// decode (troupe_bench_e2e, 2 threads) ran 296 tok/s with 1, 280 with 4 and
  /// 246 with 16 chunks per thread.
  static constexpr int64_t kChunksPerThread = 1;

  /// Run fn(begin, end) over [0, n) split into contiguous chunks
  /// (kChunksPerThread per thread); returns when all are done. Chunks are claimed
  /// dynamically, so a descheduled worker delays nothing it has not claimed: the
  /// caller takes its chunk. Calls from
  /// several threads at once are serialized; fn must not call parallel_for on
  /// the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void wake_sleepers();
  // Claim and run chunks of the job published as `gen`; false when none is left.
  bool run_chunks(uint32_t gen);

  int size_;
  std::vector<std::thread> workers_;
  // Job word: generation (32 bits) | chunk count (16) | next chunk (16).
  std::atomic<uint64_t> job_{0};
  std::atomic<uint32_t> gen_{0};      // bumped per job; workers spin on it, then sleep
  std::atomic<int> sleepers_{0};
  // Sleeping uses a condition variable (GCC 12's atomic::wait can miss a notify).
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::atomic<int> done_chunks_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> busy_{false};     // serializes concurrent callers
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace troupe::kernels::cpu
