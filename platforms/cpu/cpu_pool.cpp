#include "platforms/cpu/cpu_pool.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

namespace troupe::cpu {

kernels::cpu::ThreadPool* process_pool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  static std::mutex mu;
  // Deliberately leaked: joining pool threads during static destruction gains nothing.
  static auto* pools = new std::map<int, kernels::cpu::ThreadPool*>();
  std::lock_guard lock(mu);
  auto& p = (*pools)[threads];
  if (!p) p = new kernels::cpu::ThreadPool(threads);
  return p;
}

}  // namespace troupe::cpu
