#include "platforms/cuda/cuda_local_communicator.hpp"

#include <string>

namespace troupe::cuda {

Status CudaLocalCommunicator::copy(void* dst, const void* src, int64_t count, DType dtype) {
  const int64_t bytes = row_bytes(dtype, count);
  if (count < 0 || bytes < 0) return invalid_argument("communicator: " + std::to_string(count) + " elements of " +
                                                      std::string(to_string(dtype)) + " are not whole blocks");
  if (bytes == 0 || dst == src) return {};
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  return cuda_check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, ctx_->stream()),
                    "communicator copy on " + ctx_->name());
}

Status CudaLocalCommunicator::all_reduce(void*, int64_t count, DType) {
  return count < 0 ? invalid_argument("all_reduce: negative count") : Status();
}
Status CudaLocalCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  return copy(out, in, count, dtype);
}
Status CudaLocalCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype) {
  return copy(out, in, count, dtype);
}
Status CudaLocalCommunicator::gather(const void* in, void* out, int64_t count, DType dtype, int root) {
  if (root != 0) return invalid_argument("gather: root " + std::to_string(root) + " is outside a world of 1 rank");
  return copy(out, in, count, dtype);
}
Status CudaLocalCommunicator::broadcast(void*, int64_t count, DType, int root) {
  if (root != 0) return invalid_argument("broadcast: root " + std::to_string(root) + " is outside a world of 1 rank");
  return count < 0 ? invalid_argument("broadcast: negative count") : Status();
}
Status CudaLocalCommunicator::send(const void*, int64_t, DType, int peer) {
  return invalid_argument("send to rank " + std::to_string(peer) + ": a world of 1 rank has no peer");
}
Status CudaLocalCommunicator::recv(void*, int64_t, DType, int peer) {
  return invalid_argument("recv from rank " + std::to_string(peer) + ": a world of 1 rank has no peer");
}
Result<std::unique_ptr<DeviceCommunicator>> CudaLocalCommunicator::new_group(const std::vector<int>& ranks) {
  if (ranks != std::vector<int>{0})
    return invalid_argument("a world of 1 rank can only make the group {0}");
  return std::unique_ptr<DeviceCommunicator>(new CudaLocalCommunicator(ctx_));
}

}  // namespace troupe::cuda
