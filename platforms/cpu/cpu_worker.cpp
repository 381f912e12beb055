#include "platforms/cpu/cpu_worker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/cpu/isa.hpp"
#include "platforms/cpu/cpu_attention.hpp"
#include "platforms/cpu/cpu_pool.hpp"

namespace troupe::cpu {

Result<DType> CpuWorker::kv_cache_dtype(const std::string& cache_dtype) const {
  return cpu_kv_cache_dtype(cache_dtype);
}

std::string CpuWorker::describe_device() const {
  return std::to_string(process_pool(settings().parallel.num_threads)->size()) + " threads, kernels " +
         kernels::cpu::isa_name();
}

Result<int64_t> CpuWorker::determine_available_memory() {
  constexpr int64_t kGiB = int64_t{1} << 30;
  // Like vLLM's VLLM_CPU_KVCACHE_SPACE: an explicit size in GiB wins.
  if (const char* env = std::getenv("TROUPE_CPU_KVCACHE_SPACE"); env && *env) {
    char* end = nullptr;
    const double gib = std::strtod(env, &end);
    if (end == env || *end != '\0' || !std::isfinite(gib) || gib <= 0 || gib > 1 << 20)
      return invalid_argument(std::string("TROUPE_CPU_KVCACHE_SPACE must be a positive number of GiB, got '") + env +
                              "'");
    return static_cast<int64_t>(gib * static_cast<double>(kGiB));
  }
  if (settings().cache.kv_cache_memory_bytes > 0) return settings().cache.kv_cache_memory_bytes;
  const int64_t free_bytes = platform().memory_info().free_bytes;
  const int64_t cap = free_bytes > 0 ? static_cast<int64_t>(static_cast<double>(free_bytes) * 0.5) : kGiB;
  return std::min(kGiB, cap);
}

}  // namespace troupe::cpu
