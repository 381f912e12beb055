// probe_device and the launch-status helpers (host code only).
#include "kernels/cuda/common.hpp"

#include <string>

namespace troupe::kernels::cuda {

Status probe_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // the failed query must not look like a failed launch later
    return unavailable(std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" +
                       std::to_string(static_cast<int>(err)) + ")");
  }
  if (count <= 0) return unavailable("cudaGetDeviceCount: no CUDA device (count " + std::to_string(count) + ")");
  return {};
}

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return {};
  return internal_error(std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

Status launch_status(const char* what) { return cuda_status(cudaGetLastError(), what); }

}  // namespace troupe::kernels::cuda
