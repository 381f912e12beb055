// The cuda plugin's entry point and probe. The probe must be cheap and must
// never fail loudly on a machine without a GPU (cudaGetDeviceCount then
// answers 35 or 100): it gives the runtime's reason, which `troupe plugins`
// shows and the gpu tests skip with.
#include <cuda_runtime_api.h>

#include <string>

#include "platforms/cuda/cuda_platform.hpp"
#include "troupe/log.hpp"
#include "troupe/plugin.hpp"

namespace {

troupe::Platform* probe_cuda(std::string* why_not) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
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
