#include "platforms/cpu/cpu_worker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "kernels/cpu/isa.hpp"
#include "platforms/cpu/cpu_pool.hpp"
#include "troupe/log.hpp"
#include "troupe/model_registry.hpp"

namespace troupe::cpu {

CpuWorker::CpuWorker(const EngineConfig& config, int rank, const Platform& platform)
    : Worker("cpu"), config_(config), rank_(rank), platform_(platform) {}
CpuWorker::~CpuWorker() = default;

Status CpuWorker::init_device() {
  model_.reset();  // it would point at the ops and attention backend replaced below
  const int world_size = config_.parallel.tensor_parallel_size;
  if (rank_ < 0 || rank_ >= std::max(1, world_size))
    return invalid_argument("rank " + std::to_string(rank_) + " is outside the world of " +
                            std::to_string(world_size) + " ranks");
  auto comm = platform_.make_device_communicator(rank_, world_size);
  if (!comm.ok()) return comm.status();
  auto ops = platform_.make_ops(config_);
  if (!ops.ok()) return ops.status();
  auto attention = platform_.make_attention_backend(config_);
  if (!attention.ok()) return attention.status();
  if (!*comm || !*ops || !*attention)
    return internal_error("platform " + platform_.device_type() +
                          " returned an empty communicator, ops or attention backend");
  comm_ = std::move(*comm);
  ops_ = std::move(*ops);
  attention_ = std::move(*attention);
  TROUPE_LOG_INFO("CPU worker: {} threads, kernels {}, attention {}", process_pool(config_.parallel.num_threads)->size(),
                  kernels::cpu::isa_name(), attention_->name());
  return {};
}

Status CpuWorker::load_model(const ModelSource& source) {
  if (!ops_ || !attention_) return unavailable("load_model before init_device");
  ModelContext ctx;
  ctx.ops = ops_.get();
  ctx.attention = attention_.get();
  ctx.max_num_batched_tokens = std::max<int64_t>(1, config_.scheduler.max_num_batched_tokens);
  auto model = model_registry::create(source.architecture(), source, ctx);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  return {};
}

Result<KvCacheSpec> CpuWorker::get_kv_cache_spec() const {
  if (!model_) return unavailable("get_kv_cache_spec before load_model");
  KvCacheSpec spec;
  spec.block_size = config_.cache.block_size > 0 ? config_.cache.block_size : 16;
  spec.num_layers = model_->info().num_layers;
  spec.num_kv_heads = model_->info().num_kv_heads;
  spec.head_dim = model_->info().head_dim;
  spec.dtype = DType::f32;
  return spec;
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
  if (config_.cache.kv_cache_memory_bytes > 0) return config_.cache.kv_cache_memory_bytes;
  const int64_t free_bytes = platform_.memory_info().free_bytes;
  const int64_t cap = free_bytes > 0 ? static_cast<int64_t>(static_cast<double>(free_bytes) * 0.5) : kGiB;
  return std::min(kGiB, cap);
}

Status CpuWorker::initialize_from_config(const KvCacheConfig& config) {
  if (!attention_) return unavailable("initialize_from_config before init_device");
  auto want = get_kv_cache_spec();
  if (!want.ok()) return want.status();
  const KvCacheSpec& s = config.spec;
  if (s.num_layers != want->num_layers || s.num_kv_heads != want->num_kv_heads || s.head_dim != want->head_dim)
    return invalid_argument("KV cache config does not match the loaded model (layers, kv heads or head dim differ)");
  return attention_->allocate(s, config.num_blocks);
}

Status CpuWorker::initialize_cache(int64_t num_blocks) {
  auto spec = get_kv_cache_spec();
  if (!spec.ok()) return spec.status();
  return attention_->allocate(*spec, num_blocks);
}

Status CpuWorker::execute_dummy_batch() {
  if (!model_) return unavailable("execute_dummy_batch before load_model");
  // One short sequence in block 0; any later sequence overwrites its own slots before reading them.
  const int bs = attention_->spec().block_size;
  const int n = std::max(1, std::min<int>(bs, static_cast<int>(config_.scheduler.max_num_batched_tokens)));
  ExecuteModelRequest req;
  auto& b = req.batch;
  for (int i = 0; i < n; ++i) {
    b.token_ids.push_back(0);
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
  }
  b.query_start = {0, n};
  b.seq_lens = {n};
  b.block_tables = {{0}};
  b.logits_indices = {n - 1};
  auto out = execute_model(req);
  return out.status();
}

Status CpuWorker::compile_or_warm_up_model() {
  // No graphs on CPUs: one dummy step pages in the weights and warms the pool.
  return execute_dummy_batch();
}

Result<ModelRunnerOutput> CpuWorker::execute_model(const ExecuteModelRequest& request) {
  if (!model_) return unavailable("execute_model before load_model");
  TROUPE_RETURN_IF_ERROR(attention_->check_batch(request.batch));
  ModelRunnerOutput out;
  out.vocab_size = model_->info().vocab_size;
  out.logits.resize(request.batch.logits_indices.size() * static_cast<size_t>(out.vocab_size));
  TROUPE_RETURN_IF_ERROR(model_->forward(request.batch, out.logits.data()));
  return out;
}

}  // namespace troupe::cpu
