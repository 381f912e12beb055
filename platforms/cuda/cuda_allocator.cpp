#include "platforms/cuda/cuda_allocator.hpp"

#include <utility>

namespace troupe::cuda {
namespace {

class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(std::shared_ptr<CudaContext> ctx, void* p, int64_t n, std::shared_ptr<std::atomic<int64_t>> live)
      : ctx_(std::move(ctx)), p_(p), n_(n), serial_(ctx_->allocation_serial()), live_(std::move(live)) {
    *live_ += n_;
  }
  ~CudaBuffer() override {
    (void)ctx_->make_current();
    (void)cudaFree(p_);  // waits for the work that may still use it
    ctx_->note_memory_freed(serial_);
    *live_ -= n_;
  }
  void* data() override { return p_; }

 private:
  std::shared_ptr<CudaContext> ctx_;
  void* p_;
  int64_t n_;
  uint64_t serial_;
  std::shared_ptr<std::atomic<int64_t>> live_;
};

cudaMemcpyKind to_cuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::host_to_device: return cudaMemcpyHostToDevice;
    case CopyKind::device_to_host: return cudaMemcpyDeviceToHost;
    case CopyKind::device_to_device: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

const char* to_string(CopyKind kind) {
  switch (kind) {
    case CopyKind::host_to_device: return "host to device";
    case CopyKind::device_to_host: return "device to host";
    case CopyKind::device_to_device: return "device to device";
  }
  return "?";
}

}  // namespace

CudaAllocator::CudaAllocator(std::shared_ptr<CudaContext> ctx)
    : ctx_(std::move(ctx)), live_(std::make_shared<std::atomic<int64_t>>(0)) {}

Result<std::unique_ptr<DeviceBuffer>> CudaAllocator::allocate(int64_t bytes) {
  if (bytes <= 0) return invalid_argument(name() + ": allocation of " + std::to_string(bytes) + " bytes");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    const std::string what = name() + ": cannot allocate " + std::to_string(bytes) + " bytes (" +
                             std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                             " MiB): " + cudaGetErrorString(err);
    if (err == cudaErrorMemoryAllocation) return resource_exhausted(what);
    return internal_error(what);
  }
  return std::unique_ptr<DeviceBuffer>(new CudaBuffer(ctx_, p, bytes, live_));
}

Status CudaAllocator::copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
  if (bytes < 0) return invalid_argument(name() + ": copy of a negative size");
  if (bytes == 0) return {};
  if (dst == nullptr || src == nullptr) return invalid_argument(name() + ": copy with a null pointer");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  TROUPE_RETURN_IF_ERROR(
      cuda_check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), to_cuda(kind), ctx_->stream()),
                 name() + ": copy " + to_string(kind) + " of " + std::to_string(bytes) + " bytes"));
  if (kind == CopyKind::device_to_host) return ctx_->synchronize();
  return {};
}

Status CudaAllocator::copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t row_bytes,
                              int64_t rows, CopyKind kind) {
  if (row_bytes < 0 || rows < 0 || dst_pitch < row_bytes || src_pitch < row_bytes)
    return invalid_argument(name() + ": copy_2d pitches must hold a row and sizes must not be negative");
  if (row_bytes == 0 || rows == 0) return {};
  if (dst == nullptr || src == nullptr) return invalid_argument(name() + ": copy_2d with a null pointer");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  TROUPE_RETURN_IF_ERROR(cuda_check(
      cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch), src, static_cast<size_t>(src_pitch),
                        static_cast<size_t>(row_bytes), static_cast<size_t>(rows), to_cuda(kind), ctx_->stream()),
      name() + ": copy_2d " + to_string(kind) + " of " + std::to_string(rows) + " rows"));
  if (kind == CopyKind::device_to_host) return ctx_->synchronize();
  return {};
}

Status CudaAllocator::fill_zero(void* dst, int64_t bytes) {
  if (bytes < 0) return invalid_argument(name() + ": fill_zero of a negative size");
  if (bytes == 0) return {};
  if (dst == nullptr) return invalid_argument(name() + ": fill_zero of a null pointer");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  return cuda_check(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), ctx_->stream()),
                    name() + ": fill_zero of " + std::to_string(bytes) + " bytes");
}

}  // namespace troupe::cuda
