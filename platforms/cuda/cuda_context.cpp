#include "platforms/cuda/cuda_context.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "troupe/log.hpp"

namespace troupe::cuda {
namespace {

constexpr int64_t kInitialRingBytes = int64_t{4} << 20;
constexpr int64_t kStageAlign = 256;
constexpr size_t kRecent = 6;  // stagings remembered for reuse

}  // namespace

Status cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return {};
  (void)cudaGetLastError();  // a sticky launch error would otherwise be reported again by the next launch check
  const std::string text = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return resource_exhausted(text);
  return internal_error(text);
}

Result<std::shared_ptr<CudaContext>> CudaContext::for_device(int device) {
  static std::mutex mu;
  // Never destroyed (see the header): a leaked map of contexts.
  static auto* contexts = new std::map<int, std::shared_ptr<CudaContext>>();
  std::lock_guard lock(mu);
  int count = 0;
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (device < 0 || device >= count)
    return invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                            " visible)");
  auto it = contexts->find(device);
  if (it != contexts->end()) return it->second;
  std::shared_ptr<CudaContext> ctx(new CudaContext(device));
  TROUPE_RETURN_IF_ERROR(ctx->init());
  contexts->emplace(device, ctx);
  return ctx;
}

Result<std::shared_ptr<CudaContext>> CudaContext::current() {
  int device = 0;
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaGetDevice(&device), "cudaGetDevice"));
  return for_device(device);
}

Status CudaContext::init() {
  TROUPE_RETURN_IF_ERROR(make_current());
  TROUPE_RETURN_IF_ERROR(
      cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate on " + name()));
  TROUPE_RETURN_IF_ERROR(grow_ring(kInitialRingBytes));
  return {};
}

Status CudaContext::make_current() const {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now == device_) return {};  // thread state only: cheap
  return cuda_check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
}

Status CudaContext::synchronize() {
  TROUPE_RETURN_IF_ERROR(make_current());
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize on " + name()));
  note_synchronized();
  return {};
}

void CudaContext::note_synchronized() {
  ring_at_ = 0;
  recent_.clear();
}

Status CudaContext::grow_ring(int64_t bytes) {
  // Only called with the stream idle (init, or right after synchronize()).
  if (ring_host_ != nullptr) (void)cudaFreeHost(ring_host_);
  if (ring_device_ != nullptr) (void)cudaFree(ring_device_);
  ring_host_ = nullptr;
  ring_device_ = nullptr;
  ring_bytes_ = 0;
  void* h = nullptr;
  void* d = nullptr;
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaMallocHost(&h, static_cast<size_t>(bytes)), "cudaMallocHost (staging)"));
  const Status dev = cuda_check(cudaMalloc(&d, static_cast<size_t>(bytes)), "cudaMalloc (staging) on " + name());
  if (!dev.ok()) {
    (void)cudaFreeHost(h);
    return dev;
  }
  ring_host_ = static_cast<uint8_t*>(h);
  ring_device_ = static_cast<uint8_t*>(d);
  ring_bytes_ = bytes;
  ring_at_ = 0;
  recent_.clear();
  return {};
}

Status CudaContext::reserve_staging(int64_t bytes) {
  if (bytes <= ring_bytes_) return {};
  TROUPE_RETURN_IF_ERROR(synchronize());
  return grow_ring(bytes);
}

Result<const void*> CudaContext::stage(const void* host, int64_t bytes) {
  if (bytes < 0) return invalid_argument("stage: negative size");
  TROUPE_RETURN_IF_ERROR(make_current());
  if (bytes == 0) return static_cast<const void*>(ring_device_);
  if (host == nullptr) return invalid_argument("stage: null host pointer");
  if (capturing_) {
    for (const GraphInput& in : graph_inputs_)
      if (in.host == host && bytes <= in.bytes) return static_cast<const void*>(in.device);
    return not_supported("an op staged " + std::to_string(bytes) +
                         " bytes of host data that a CUDA graph could not refresh between replays");
  }
  for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
    if (it->bytes == bytes && std::memcmp(ring_host_ + it->offset, host, static_cast<size_t>(bytes)) == 0)
      return static_cast<const void*>(ring_device_ + it->offset);
  const int64_t need = (bytes + kStageAlign - 1) / kStageAlign * kStageAlign;
  if (ring_at_ + need > ring_bytes_) {
    // Every region may still be read by enqueued work: wait for it, then start over.
    TROUPE_RETURN_IF_ERROR(synchronize());
    if (need > ring_bytes_) TROUPE_RETURN_IF_ERROR(grow_ring(std::max(need, 2 * ring_bytes_)));
  }
  const int64_t at = ring_at_;
  std::memcpy(ring_host_ + at, host, static_cast<size_t>(bytes));
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(ring_device_ + at, ring_host_ + at, static_cast<size_t>(bytes),
                                                    cudaMemcpyHostToDevice, stream_),
                                    "staging copy to " + name()));
  ring_at_ = at + need;
  recent_.push_back({at, bytes});
  if (recent_.size() > kRecent) recent_.erase(recent_.begin());
  return static_cast<const void*>(ring_device_ + at);
}

void CudaContext::begin_graph_inputs(std::vector<GraphInput> inputs) {
  graph_inputs_ = std::move(inputs);
  capturing_ = true;
}

void CudaContext::end_graph_inputs() {
  graph_inputs_.clear();
  capturing_ = false;
}

Result<kernels::cuda::CublasGemm*> CudaContext::blas() {
  if (!blas_) {
    TROUPE_RETURN_IF_ERROR(make_current());
    auto made = kernels::cuda::CublasGemm::create();
    if (!made.ok()) return made.status();
    blas_ = std::move(*made);
  }
  return blas_.get();
}

void CudaContext::record(const Status& s) {
  if (s.ok()) return;
  std::lock_guard lock(error_mu_);
  if (has_error_.load()) return;
  error_ = s;
  has_error_ = true;
  TROUPE_LOG_ERROR("{}: {}", name(), s.to_string());
}

Status CudaContext::take_error() {
  if (!has_error_.load()) return {};
  std::lock_guard lock(error_mu_);
  Status s = std::move(error_);
  error_ = Status();
  has_error_ = false;
  return s;
}

}  // namespace troupe::cuda
