#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

TEST(ThreadPool, CoversTheRangeExactlyOnceInContiguousChunks) {
  for (int threads : {1, 2, 4, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 3, 10, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        calls.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
      EXPECT_LE(calls.load(), threads == 1 ? 1 : std::min<int64_t>(n, threads * ThreadPool::kChunksPerThread));
    }
  }
}

TEST(ThreadPool, ZeroOrNegativeSizesAreNoOps) {
  ThreadPool pool(3);
  bool called = false;
  pool.parallel_for(0, [&](int64_t, int64_t) { called = true; });
  pool.parallel_for(-5, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_EQ(ThreadPool(0).size(), 1);
}

TEST(ThreadPool, ManySmallJobsAndUsesWorkers) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  int64_t total = 0;
  for (int rep = 0; rep < 20000; ++rep) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for(3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i + 1);
      if (rep % 100 == 0) {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
    });
    total += sum.load();
  }
  EXPECT_EQ(total, 20000 * 6);
  EXPECT_GE(ids.size(), 1u);
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 500; ++rep)
        pool.parallel_for(10, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 500 * 10);
}

TEST(ThreadPool, WorkersSleepAndWakeAgain) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  pool.parallel_for(2, [&](int64_t b, int64_t e) { n.fetch_add(static_cast<int>(e - b)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin phase: workers sleep
  pool.parallel_for(2, [&](int64_t b, int64_t e) { n.fetch_add(static_cast<int>(e - b)); });
  EXPECT_EQ(n.load(), 4);
}

}  // namespace
}  // namespace troupe::kernels::cpu
