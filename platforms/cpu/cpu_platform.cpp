#include "platforms/cpu/cpu_platform.hpp"

#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "platforms/cpu/cpu_attention.hpp"
#include "platforms/cpu/cpu_ops.hpp"
#include "troupe/log.hpp"
#include "troupe/model_runner/settings.hpp"

namespace troupe::cpu {

std::string CpuPlatform::device_name(int) const {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

Status CpuPlatform::check_and_update_config(ConfigEditor& config) const {
  const ParallelSettings parallel = ParallelSettings::from(config);
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1)
    return invalid_argument("tensor_parallel_size (" + std::to_string(parallel.tensor_parallel_size) +
                            ") and pipeline_parallel_size (" + std::to_string(parallel.pipeline_parallel_size) +
                            ") must be at least 1");
  const int world = parallel.world_size();
  if (world > kMaxCpuRanks)
    return invalid_argument("platform cpu runs at most " + std::to_string(kMaxCpuRanks) + " ranks, not " +
                            std::to_string(world) + " (tensor_parallel_size x pipeline_parallel_size)");
  // Whether the model's heads and layers divide is checked where the model is loaded (its
  // head counts are not in the config): LlamaModel::create answers with vLLM's wording.
  if (parallel.worker_cls.empty()) TROUPE_RETURN_IF_ERROR(config.set("parallel.worker_cls", "troupe.cpu.CpuWorker"));
  if (parallel.num_threads <= 0) {
    // One rank per process, all on this host: the ranks share its cores, and so do the
    // replicas of data parallelism (read by name: no SDK struct carries it).
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int replicas = std::max<int>(1, static_cast<int>(config.get_int("parallel.data_parallel_size", 1)));
    TROUPE_RETURN_IF_ERROR(config.set_int("parallel.num_threads", std::max(1, cores / (world * replicas))));
  }
  if (config.get_int("cache.block_size", 16) <= 0) TROUPE_RETURN_IF_ERROR(config.set_int("cache.block_size", 16));
  // The KV cache is f16 unless asked otherwise: half the memory and bandwidth of f32 (llama.cpp's default too).
  auto kv_dtype = cpu_kv_cache_dtype(config.get_string("cache.cache_dtype", "auto"));
  if (!kv_dtype.ok()) return kv_dtype.status();
  TROUPE_RETURN_IF_ERROR(config.set("cache.cache_dtype", *kv_dtype == DType::f16 ? "float16" : "float32"));
  // No graph capture on CPUs: every step runs eagerly.
  TROUPE_RETURN_IF_ERROR(config.set_bool("compilation.enforce_eager", true));
  return config.set("compilation.graph_mode", "none");
}

DeviceMemory CpuPlatform::memory_info(int) const {
  long pages = sysconf(_SC_PHYS_PAGES);
  long avail = sysconf(_SC_AVPHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return {static_cast<int64_t>(pages) * page, static_cast<int64_t>(avail) * page};
}


// Exactly the weight types the kernels compute. q8_1 and q8_k have a known layout (ggml
// uses them for activations) but no CPU kernel reads them as weights.
std::vector<std::string> CpuPlatform::supported_quantizations() const { return weight_type_names(); }

bool CpuPlatform::supports(std::string_view capability) const {
  return capability == "prefix_caching" || capability == "chunked_prefill";
}

}  // namespace troupe::cpu
