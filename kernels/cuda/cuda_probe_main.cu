// troupe_cuda_probe: does CUDA work on this machine? Needs nothing but the CUDA
// toolkit (no troupe library, no other dependency), so scripts/gpu-check.sh
// builds it with nvcc alone and runs it before anything else: its verdict says
// whether the run is a GPU run at all. It lists the devices, then allocates,
// runs a kernel and checks its result on device 0.
// Exit status: 0 CUDA works; 2 CUDA unavailable (no driver, no device: the
// reason is printed); 1 a device is there but the check failed.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

__global__ void fill(int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 3 * i + 1;
}

int fail(const char* what, cudaError_t err) {
  std::printf("CUDA check failed: %s: %s: %s\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return 1;
}

}  // namespace

int main() {
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  std::printf("CUDA runtime %d, driver %d\n", runtime, driver);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    std::printf("CUDA unavailable: cudaGetDeviceCount: %s (%d)\n", cudaGetErrorString(err), static_cast<int>(err));
    return 2;
  }
  if (count <= 0) {
    std::printf("CUDA unavailable: no CUDA device (count %d)\n", count);
    return 2;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) return fail("cudaGetDeviceProperties", cudaGetLastError());
    std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB\n", d, p.name, p.major, p.minor, p.multiProcessorCount,
                static_cast<double>(p.totalGlobalMem) / (1 << 30));
  }
  constexpr int kN = 1 << 20;
  int* d_out = nullptr;
  if (cudaError_t e = cudaMalloc(&d_out, kN * sizeof(int)); e != cudaSuccess) return fail("cudaMalloc", e);
  fill<<<(kN + 255) / 256, 256>>>(d_out, kN);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return fail("kernel launch", e);
  static int host[kN];
  if (cudaError_t e = cudaMemcpy(host, d_out, sizeof(host), cudaMemcpyDeviceToHost); e != cudaSuccess)
    return fail("cudaMemcpy", e);
  (void)cudaFree(d_out);
  for (int i = 0; i < kN; ++i)
    if (host[i] != 3 * i + 1) {
      std::printf("CUDA check failed: element %d is %d, not %d\n", i, host[i], 3 * i + 1);
      return 1;
    }
  std::printf("CUDA works: a kernel ran on device 0 and its %d results are right\n", kN);
  return 0;
}
