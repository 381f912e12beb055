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

Status CudaPlatform::check_and_update_config(ConfigEditor& config) const {
  const ParallelSettings parallel = ParallelSettings::from(config);
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
  if (parallel.worker_cls.empty()) TROUPE_RETURN_IF_ERROR(config.set("parallel.worker_cls", "troupe.cuda.CudaWorker"));
  if (config.get_int("cache.block_size", 16) <= 0) TROUPE_RETURN_IF_ERROR(config.set_int("cache.block_size", 16));
  auto kv = cuda_kv_cache_dtype(config.get_string("cache.cache_dtype", "auto"));
  if (!kv.ok()) return kv.status();
  TROUPE_RETURN_IF_ERROR(
      config.set("cache.cache_dtype", *kv == DType::f16 ? "float16" : *kv == DType::bf16 ? "bfloat16" : "float32"));
  // Decode steps replay CUDA graphs unless --enforce-eager (the worker says when it cannot).
  return config.set("compilation.graph_mode", config.get_bool("compilation.enforce_eager") ? "none" : "cuda_graph");
}

Result<std::unique_ptr<AttentionBackend>> CudaPlatform::make_attention_backend(const ConfigView& config) const {
  auto dtype = cuda_kv_cache_dtype(config.get_string("cache.cache_dtype", "auto"));
  if (!dtype.ok()) return dtype.status();
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<AttentionBackend>(new CudaAttentionBackend(*ctx));
}

Result<std::unique_ptr<Ops>> CudaPlatform::make_ops(const ConfigView&) const {
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<Ops>(new CudaOps(*ctx));
}

Result<std::unique_ptr<DeviceAllocator>> CudaPlatform::make_allocator(const ConfigView&) const {
  auto ctx = CudaContext::current();
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<DeviceAllocator>(new CudaAllocator(*ctx));
}

Result<std::string> CudaPlatform::make_communicator_id(const ConfigView& config) const {
  const ParallelSettings parallel = ParallelSettings::from(config);
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

Result<std::unique_ptr<DeviceCommunicator>> CudaPlatform::make_device_communicator(const ConfigView& config,
                                                                                   int rank) const {
  const ParallelSettings parallel = ParallelSettings::from(config);
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
                            "rank in the setting parallel.communicator_id");
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

Result<std::unique_ptr<Worker>> CudaPlatform::make_worker(const ConfigView& config, int rank) const {
  const std::string worker_cls = config.get_string("parallel.worker_cls");
  if (!worker_cls.empty() && worker_cls != "troupe.cuda.CudaWorker")
    return not_found("platform cuda has no worker class '" + worker_cls + "'");
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
