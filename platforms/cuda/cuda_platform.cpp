// CudaPlatform and the cuda plugin's probe. Only the CUDA runtime API is
// used (no .cu files): the probe must be cheap and must never fail loudly on
// a machine without a GPU (cudaGetDeviceCount then answers 35 or 100).
#include "platforms/cuda/cuda_platform.hpp"

#include <cuda_runtime_api.h>

#include "troupe/log.hpp"
#include "troupe/plugin.hpp"

namespace troupe::cuda {
namespace {

Status not_yet(const std::string& what) {
  return not_supported(what + " is not implemented for platform cuda yet");
}

}  // namespace

std::string CudaPlatform::device_name(int device_id) const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_id) != cudaSuccess) return "cuda:" + std::to_string(device_id);
  return prop.name;
}

Status CudaPlatform::check_and_update_config(EngineConfig& config) const {
  if (config.parallel.tensor_parallel_size > device_count_)
    return invalid_argument("tensor_parallel_size " + std::to_string(config.parallel.tensor_parallel_size) +
                            " exceeds the " + std::to_string(device_count_) + " CUDA device(s) visible");
  if (config.parallel.worker_cls.empty()) config.parallel.worker_cls = "troupe.cuda.CudaWorker";
  if (config.cache.block_size <= 0) config.cache.block_size = 16;
  if (config.cache.cache_dtype == "auto") config.cache.cache_dtype = "float16";
  config.compilation.graph_mode = config.compilation.enforce_eager ? "none" : "cuda_graph";
  return {};
}

Result<std::unique_ptr<AttentionBackend>> CudaPlatform::make_attention_backend(const EngineConfig&) const {
  return not_yet("paged attention");
}
Result<std::unique_ptr<Ops>> CudaPlatform::make_ops(const EngineConfig&) const { return not_yet("compute ops"); }
Result<std::unique_ptr<DeviceCommunicator>> CudaPlatform::make_device_communicator(const ParallelConfig&, int) const {
  return not_yet("the NCCL device communicator");
}
Result<std::unique_ptr<Worker>> CudaPlatform::make_worker(const EngineConfig& config, int) const {
  return not_yet("worker " + config.parallel.worker_cls);
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
    TROUPE_LOG_WARNING("cudaMemGetInfo failed on device {}", device_id);
  }
  (void)cudaSetDevice(previous);
  return m;
}

std::vector<std::string> CudaPlatform::supported_dtypes() const { return {"float32", "float16", "bfloat16"}; }
std::vector<std::string> CudaPlatform::supported_quantizations() const { return {}; }

Status CudaPlatform::verify_quantization(std::string_view quant) const {
  return not_supported("platform cuda cannot run weights of type " + std::string(quant.empty() ? "(none)" : quant) +
                       " yet: its worker, kernels wiring and attention backend are not implemented");
}

}  // namespace troupe::cuda

namespace {

troupe::Platform* probe_cuda(std::string* why_not) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why_not = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" +
               std::to_string(static_cast<int>(err)) + ")";
    TROUPE_LOG_DEBUG("cuda platform: {}: no CUDA platform", *why_not);
    return nullptr;
  }
  if (count == 0) {
    *why_not = "cudaGetDeviceCount: no CUDA device found (0 devices)";
    TROUPE_LOG_DEBUG("cuda platform: {}", *why_not);
    return nullptr;
  }
  return new troupe::cuda::CudaPlatform(count);
}

}  // namespace

TROUPE_PLUGIN(troupe::platform_plugin("cuda", &probe_cuda))
