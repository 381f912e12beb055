#include "troupe/model_runner/settings.hpp"

namespace troupe {
namespace {

int get_int32(const ConfigView& c, std::string_view key, int fallback) {
  return static_cast<int>(c.get_int(key, fallback));
}

}  // namespace

ParallelSettings ParallelSettings::from(const ConfigView& c) {
  ParallelSettings s;
  s.tensor_parallel_size = get_int32(c, "parallel.tensor_parallel_size", s.tensor_parallel_size);
  s.pipeline_parallel_size = get_int32(c, "parallel.pipeline_parallel_size", s.pipeline_parallel_size);
  s.communicator_id = c.get_string("parallel.communicator_id");
  s.communicator_host = c.get_string("parallel.communicator_host");
  s.num_threads = get_int32(c, "parallel.num_threads", s.num_threads);
  s.worker_cls = c.get_string("parallel.worker_cls");
  return s;
}

CacheSettings CacheSettings::from(const ConfigView& c) {
  CacheSettings s;
  s.block_size = get_int32(c, "cache.block_size", s.block_size);
  s.cache_dtype = c.get_string("cache.cache_dtype", s.cache_dtype);
  s.kv_cache_memory_bytes = c.get_int("cache.kv_cache_memory_bytes", s.kv_cache_memory_bytes);
  s.memory_utilization = c.get_double("cache.memory_utilization", s.memory_utilization);
  return s;
}

RunnerSettings RunnerSettings::from(const ConfigView& c) {
  RunnerSettings s;
  s.parallel = ParallelSettings::from(c);
  s.cache = CacheSettings::from(c);
  s.max_num_batched_tokens = c.get_int("scheduler.max_num_batched_tokens", s.max_num_batched_tokens);
  s.max_num_seqs = get_int32(c, "scheduler.max_num_seqs", s.max_num_seqs);
  s.max_model_len = c.get_int("model.max_model_len", s.max_model_len);
  s.runner = c.get_string("model.runner", s.runner);
  s.enable_lora = c.get_bool("lora.enable_lora", s.enable_lora);
  s.max_lora_rank = get_int32(c, "lora.max_lora_rank", s.max_lora_rank);
  s.enforce_eager = c.get_bool("compilation.enforce_eager", s.enforce_eager);
  return s;
}

}  // namespace troupe
