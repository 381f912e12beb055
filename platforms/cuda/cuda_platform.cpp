// CudaPlatform: identity, device queries, config defaults and the factories of
// the worker's parts.
#include "platforms/cuda/cuda_platform.hpp"

#include <cuda_runtime_api.h>

#include "platforms/cuda/cuda_allocator.hpp"
#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_context.hpp"
#include "platforms/cuda/cuda_local_communicator.hpp"
#include "platforms/cuda/cuda_ops.hpp"
#include "platforms/cuda/cuda_worker.hpp"
#include "troupe/log.hpp"
#ifdef TROUPE_CUDA_HAVE_NCCL
#include "platforms/cuda/nccl_communicator.hpp"
#endif

namespace troupe::cuda {

std::string CudaPlatform::device_name(int device_id) const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_id) != cudaSuccess) return "cuda:" + std::to_string(device_id);
  return prop.name;
}

Status CudaPlatform::check_and_update_config(EngineConfig& config) const {
  ParallelConfig& parallel = config.parallel;
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1)
    return invalid_argument("tensor_parallel_size (" + std::to_string(parallel.tensor_parallel_size) +
                            ") and pipeline_parallel_size (" + std::to_string(parallel.pipeline_parallel_size) +
                            ") must be at least 1");
  if (parallel.tensor_parallel_size > device_count_)
    return invalid_argument("tensor_parallel_size " + std::to_string(parallel.tensor_parallel_size) +
                            " exceeds the " + std::to_string(device_count_) + " CUDA device(s) visible");
#ifndef TROUPE_CUDA_HAVE_NCCL
  if (parallel.world_size() > 1)
    return not_supported("platform cuda was built without NCCL: it runs a world of 1 rank, not " +
                         std::to_string(parallel.world_size()));
#endif
  if (parallel.worker_cls.empty()) parallel.worker_cls = "troupe.cuda.CudaWorker";
  if (config.cache.block_size <= 0) config.cache.block_size = 16;
  auto kv = cuda_kv_cache_dtype(config.cache.cache_dtype);
  if (!kv.ok()) return kv.status();
  config.cache.cache_dtype = *kv == DType::f16 ? "float16" : *kv == DType::bf16 ? "bfloat16" : "float32";
  // Decode steps replay CUDA graphs unless --enforce-eager (the worker says when it cannot).
  config.compilation.graph_mode = config.compilation.enforce_eager ? "none" : "cuda_graph";
  return {};
}

Result<std::unique_ptr<AttentionBackend>> CudaPlatform::make_attention_backend(const EngineConfig& config) const {
  auto dtype = cuda_kv_cache_dtype(config.cache.cache_dtype);
  if (!dtype.ok()) return dtype.status();
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<AttentionBackend>(new CudaAttentionBackend(*ctx));
}

Result<std::unique_ptr<Ops>> CudaPlatform::make_ops(const EngineConfig&) const {
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<Ops>(new CudaOps(*ctx));
}

Result<std::unique_ptr<DeviceAllocator>> CudaPlatform::make_allocator(const EngineConfig&) const {
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<DeviceAllocator>(new CudaAllocator(*ctx));
}

Result<std::string> CudaPlatform::make_communicator_id(const ParallelConfig& parallel) const {
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1)
    return invalid_argument("a communicator needs tensor_parallel_size and pipeline_parallel_size of at least 1");
  if (parallel.world_size() == 1) return std::string();
#ifdef TROUPE_CUDA_HAVE_NCCL
  return make_nccl_id();
#else
  return not_supported("platform cuda was built without NCCL: no communicator for " +
                       std::to_string(parallel.world_size()) + " ranks");
#endif
}

Result<std::unique_ptr<DeviceCommunicator>> CudaPlatform::make_device_communicator(const ParallelConfig& parallel,
                                                                                   int rank) const {
  const int world = parallel.world_size();
  if (parallel.tensor_parallel_size < 1 || parallel.pipeline_parallel_size < 1 || rank < 0 || rank >= world)
    return invalid_argument("platform cuda: rank " + std::to_string(rank) + " is outside the world of " +
                            std::to_string(world) + " ranks");
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  if (world == 1) return std::unique_ptr<DeviceCommunicator>(new CudaLocalCommunicator(*ctx));
#ifdef TROUPE_CUDA_HAVE_NCCL
  if (parallel.communicator_id.empty())
    return invalid_argument("platform cuda needs a communicator id for a world of " + std::to_string(world) +
                            " ranks: the head makes one with Platform::make_communicator_id and sends it to every "
                            "rank in config.parallel.communicator_id");
  auto timeout = nccl_timeout_from_env();
  if (!timeout.ok()) return timeout.status();
  auto comm = NcclCommunicator::create(parallel.communicator_id, world, rank, *ctx, *timeout);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<DeviceCommunicator>(std::move(*comm));
#else
  return not_supported("platform cuda was built without NCCL: no communicator for " + std::to_string(world) +
                       " ranks");
#endif
}

Result<std::unique_ptr<Worker>> CudaPlatform::make_worker(const EngineConfig& config, int rank) const {
  if (!config.parallel.worker_cls.empty() && config.parallel.worker_cls != "troupe.cuda.CudaWorker")
    return not_found("platform cuda has no worker class '" + config.parallel.worker_cls + "'");
  return std::unique_ptr<Worker>(new CudaWorker(config, rank, *this, device_count_));
}

DeviceMemory CudaPlatform::memory_info(int device_id) const {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = 0;
  DeviceMemory m;
  size_t free_b = 0, total_b = 0;
  if (cudaSetDevice(device_id) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    m.total_bytes = static_cast<int64_t>(total_b);
    m.free_bytes = static_cast<int64_t>(free_b);
  } else {
    (void)cudaGetLastError();
    TROUPE_LOG_WARNING("cudaMemGetInfo failed on device {}", device_id);
  }
  (void)cudaSetDevice(previous);
  return m;
}


std::vector<std::string> CudaPlatform::supported_quantizations() const { return weight_type_names(); }

bool CudaPlatform::supports(std::string_view capability) const {
  return capability == "prefix_caching" || capability == "chunked_prefill";
}

}  // namespace troupe::cuda
