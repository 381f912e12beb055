// The engine settings a platform's worker and factories read, typed. The
// engine hands plugins its settings by name (troupe/config_view.hpp); these
// structs are read from such a view inside the plugin, so they never cross
// the plugin boundary and are not in the SDK's fingerprint. The defaults are
// the engine's, for a view that lacks a setting (the conformance kit's).
#pragma once

#include <cstdint>
#include <string>

#include "troupe/config_view.hpp"

namespace troupe {

/// "parallel.*"
struct ParallelSettings {
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  std::string communicator_id;
  std::string communicator_host;
  int num_threads = 0;
  std::string worker_cls;
  int world_size() const { return tensor_parallel_size * pipeline_parallel_size; }
  static ParallelSettings from(const ConfigView& config);
};

/// "cache.*"
struct CacheSettings {
  int block_size = 16;
  std::string cache_dtype = "auto";
  int64_t kv_cache_memory_bytes = 0;
  double memory_utilization = 0.9;
  static CacheSettings from(const ConfigView& config);
};

/// What ModelRunnerWorker reads besides those.
struct RunnerSettings {
  ParallelSettings parallel;
  CacheSettings cache;
  int64_t max_num_batched_tokens = 2048;   // "scheduler.max_num_batched_tokens"
  int max_num_seqs = 256;                  // "scheduler.max_num_seqs"
  int64_t max_model_len = 0;               // "model.max_model_len"
  std::string runner = "auto";             // "model.runner"
  bool enable_lora = false;                // "lora.enable_lora"
  int max_lora_rank = 16;                  // "lora.max_lora_rank"
  bool enforce_eager = false;              // "compilation.enforce_eager"
  static RunnerSettings from(const ConfigView& config);
};

}  // namespace troupe
