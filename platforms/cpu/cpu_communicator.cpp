#include "platforms/cpu/cpu_communicator.hpp"

#include <cstring>
#include <string>

namespace troupe::cpu {
namespace {

Result<int64_t> bytes_of(int64_t count, DType dtype) {
  if (count < 0) return invalid_argument("collective: negative element count");
  const int64_t b = row_bytes(dtype, count);
  if (b < 0) return invalid_argument("collective: " + std::to_string(count) + " elements of " +
                                     std::string(to_string(dtype)) + " are not a whole number of blocks");
  return b;
}

Status copy(const void* in, void* out, int64_t count, DType dtype) {
  auto b = bytes_of(count, dtype);
  if (!b.ok()) return b.status();
  if (in != out && *b > 0) std::memmove(out, in, static_cast<size_t>(*b));
  return {};
}

Status check_root(int root) {
  if (root != 0) return invalid_argument("collective: root " + std::to_string(root) + " is not a rank of a world of 1");
  return {};
}

}  // namespace

Status CpuCommunicator::all_reduce(void*, int64_t count, DType dtype) { return bytes_of(count, dtype).status(); }
Status CpuCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  return copy(in, out, count, dtype);
}
Status CpuCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype) {
  return copy(in, out, count, dtype);
}
Status CpuCommunicator::gather(const void* in, void* out, int64_t count, DType dtype, int root) {
  TROUPE_RETURN_IF_ERROR(check_root(root));
  return copy(in, out, count, dtype);
}
Status CpuCommunicator::broadcast(void*, int64_t count, DType dtype, int root) {
  TROUPE_RETURN_IF_ERROR(check_root(root));
  return bytes_of(count, dtype).status();
}
Status CpuCommunicator::send(const void*, int64_t, DType, int peer) {
  return invalid_argument("send: peer " + std::to_string(peer) + " does not exist in a world of 1 rank");
}
Status CpuCommunicator::recv(void*, int64_t, DType, int peer) {
  return invalid_argument("recv: peer " + std::to_string(peer) + " does not exist in a world of 1 rank");
}
Result<std::unique_ptr<DeviceCommunicator>> CpuCommunicator::new_group(const std::vector<int>& ranks) {
  if (ranks != std::vector<int>{0}) return invalid_argument("new_group: a world of 1 rank has only the group {0}");
  return std::unique_ptr<DeviceCommunicator>(new CpuCommunicator());
}

}  // namespace troupe::cpu
