#include "platforms/cuda/cuda_worker.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "platforms/cuda/cuda_attention.hpp"
#include "troupe/log.hpp"

namespace troupe::cuda {

CudaWorker::CudaWorker(const EngineConfig& config, int rank, const Platform& platform, int device_count)
    : ModelRunnerWorker(config, rank, platform), device_(device_count > 0 ? rank % device_count : 0) {}

Status CudaWorker::init_device() {
  if (!claim_ && !devices_shared_on_purpose()) {
    char bus_id[64] = {};
    TROUPE_RETURN_IF_ERROR(cuda_check(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device_),
                                      "cudaDeviceGetPCIBusId of cuda:" + std::to_string(device_)));
    auto claim = DeviceClaim::acquire(bus_id, "cuda:" + std::to_string(device_) + " (" + bus_id + ")", rank());
    if (!claim.ok()) return claim.status();
    claim_ = std::move(*claim);
  }
  auto ctx = CudaContext::for_device(device_);
  if (!ctx.ok()) return ctx.status();
  ctx_ = *ctx;
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  (void)ctx_->take_error();  // a failure of an earlier worker on this device is not ours
  return ModelRunnerWorker::init_device();
}

Status CudaWorker::load_model(const ModelSource& source) {
  if (!ctx_) return unavailable("load_model before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  const Status loaded = ModelRunnerWorker::load_model(source);
  const Status recorded = ctx_->take_error();  // e.g. a kernel the model's set-up launched
  TROUPE_RETURN_IF_ERROR(loaded);
  if (!recorded.ok()) return recorded;
  return ctx_->synchronize();
}

Result<int64_t> CudaWorker::determine_available_memory() {
  if (config().cache.kv_cache_memory_bytes > 0) return config().cache.kv_cache_memory_bytes;
  const double share = config().cache.memory_utilization;
  if (!(share > 0 && share <= 1))
    return invalid_argument("gpu memory utilization " + std::to_string(share) + " must be in (0, 1]");
  if (!ctx_) return unavailable("determine_available_memory before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
  const DeviceMemory mem = platform().memory_info(device_);
  if (mem.total_bytes <= 0) return unavailable("cudaMemGetInfo failed on " + ctx_->name());
  const int64_t in_use = mem.total_bytes - std::max<int64_t>(0, mem.free_bytes);
  const auto budget = static_cast<int64_t>(static_cast<double>(mem.total_bytes) * share) - in_use;
  TROUPE_LOG_INFO("{}: {:.2f} GiB total, {:.2f} GiB in use (weights, activations, other processes); "
                  "--gpu-memory-utilization {} leaves {:.2f} GiB for the KV cache",
                  ctx_->name(), static_cast<double>(mem.total_bytes) / (1 << 30),
                  static_cast<double>(in_use) / (1 << 30), share, static_cast<double>(budget) / (1 << 30));
  if (budget <= 0)
    return resource_exhausted("no memory of " + ctx_->name() + " is left for the KV cache: " +
                              std::to_string(in_use >> 20) + " MiB of " + std::to_string(mem.total_bytes >> 20) +
                              " MiB are in use, and --gpu-memory-utilization is " + std::to_string(share));
  return budget;
}

Status CudaWorker::compile_or_warm_up_model() {
  if (!ctx_) return unavailable("compile_or_warm_up_model before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  // A prefill-shaped step (the SDK's dummy batch: one sequence of a block's tokens)...
  TROUPE_RETURN_IF_ERROR(execute_dummy_batch());
  // ... and a one-token decode at the end of that sequence (the GEMV path).
  if (attention() != nullptr && attention()->num_blocks() > 0 && config().model.runner != "pooling") {
    const int bs = attention()->spec().block_size;
    ExecuteModelRequest req;
    auto& b = req.batch;
    const int pos = std::max(0, std::min<int>(bs, static_cast<int>(config().scheduler.max_num_batched_tokens)) - 1);
    b.token_ids = {0};
    b.positions = {pos};
    b.slot_mapping = {pos};
    b.query_start = {0, 1};
    b.seq_lens = {pos + 1};
    b.block_tables = {{0}};
    b.logits_indices = {0};
    auto out = execute_model(req);
    if (!out.ok()) return out.status();
  }
  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
  TROUPE_LOG_INFO("{}: warmed up eagerly (no CUDA graphs are captured)", ctx_->name());
  return {};
}

Result<ModelRunnerOutput> CudaWorker::execute_model(const ExecuteModelRequest& request) {
  if (!ctx_) return unavailable("execute_model before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  auto out = ModelRunnerWorker::execute_model(request);
  // An op or attention call that failed recorded why; its outputs are not to be trusted.
  Status recorded = ctx_->take_error();
  if (!recorded.ok()) return recorded;
  return out;
}

Result<DType> CudaWorker::kv_cache_dtype(const std::string& cache_dtype) const {
  return cuda_kv_cache_dtype(cache_dtype);
}

std::string CudaWorker::describe_device() const {
  return platform().device_name(device_) + " (" + (ctx_ ? ctx_->name() : "cuda:" + std::to_string(device_)) + ")";
}

}  // namespace troupe::cuda
