// What every kernels/cuda launcher shares: the stream type, Status, the device
// probe (its message is the reason a GPU test skips) and the launch check.
// Launchers take raw device pointers and shapes, enqueue on `stream` and
// return without synchronizing; a Status reports bad arguments and launch
// failures, never the outcome of the asynchronous work itself.
#pragma once

#include <cuda_runtime_api.h>  // cudaStream_t (the only CUDA type in these headers)

#include <cstdint>

#include "troupe/dtype.hpp"   // DType
#include "troupe/status.hpp"  // Status, Result

namespace troupe::kernels::cuda {

/// ok when at least one CUDA device is usable. Otherwise unavailable() with
/// the runtime's reason, e.g. "cudaGetDeviceCount: CUDA driver version is
/// insufficient for CUDA runtime version (35)", or "cudaGetDeviceCount: no
/// CUDA device (count 0)".
Status probe_device();

/// Status of the last launch on this thread (cudaGetLastError, which also
/// clears it): ok, or internal("<what>: <cuda error name>: <text>").
Status launch_status(const char* what);

/// Status of a CUDA runtime call's result, with `what` in the message.
Status cuda_status(cudaError_t err, const char* what);

/// True when the n elements at ptr would be read or written with accesses of
/// `align` bytes (pointer multiple of align).
inline bool is_aligned(const void* ptr, int64_t align) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(align) == 0;
}

}  // namespace troupe::kernels::cuda
