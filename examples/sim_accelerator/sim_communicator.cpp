#include "sim_communicator.hpp"

#include <cstring>
#include <string>

#include "sim_memory.hpp"

namespace sim {

troupe::Status SimCommunicator::device_copy(const char* op, const void* in, void* out, int64_t count,
                                            troupe::DType dtype) {
  if (count < 0) return troupe::invalid_argument(std::string("sim ") + op + ": negative count");
  const auto tr = troupe::dtype_traits(static_cast<uint32_t>(dtype));
  if (!tr || tr->quantized) return troupe::invalid_argument(std::string("sim ") + op + ": unsupported element type");
  const int64_t bytes = count * tr->block_bytes / tr->block_elems;
  if (bytes == 0) return {};
  auto src = d_.map(in, bytes);
  if (!src.ok()) return troupe::Status(src.status().code(), std::string("sim ") + op + ": " + src.status().message());
  if (out == nullptr || out == in) {
    if (dtype == troupe::DType::f32) maybe_break(op, reinterpret_cast<float*>(*src), count);
    return {};
  }
  auto dst = d_.map(out, bytes);
  if (!dst.ok()) return troupe::Status(dst.status().code(), std::string("sim ") + op + ": " + dst.status().message());
  std::memmove(*dst, *src, static_cast<size_t>(bytes));
  if (dtype == troupe::DType::f32) maybe_break(op, reinterpret_cast<float*>(*dst), count);
  return {};
}

troupe::Status SimCommunicator::all_reduce(void* buf, int64_t count, troupe::DType dtype) {
  return device_copy("all_reduce", buf, nullptr, count, dtype);
}
troupe::Status SimCommunicator::all_gather(const void* in, void* out, int64_t count, troupe::DType dtype) {
  return device_copy("all_gather", in, out, count, dtype);
}
troupe::Status SimCommunicator::reduce_scatter(const void* in, void* out, int64_t count, troupe::DType dtype) {
  return device_copy("reduce_scatter", in, out, count, dtype);
}
troupe::Status SimCommunicator::gather(const void* in, void* out, int64_t count, troupe::DType dtype, int root) {
  if (root != 0) return troupe::invalid_argument("sim gather: root " + std::to_string(root) + " is not in a world of 1");
  return device_copy("gather", in, out, count, dtype);
}
troupe::Status SimCommunicator::broadcast(void* buf, int64_t count, troupe::DType dtype, int root) {
  if (root != 0)
    return troupe::invalid_argument("sim broadcast: root " + std::to_string(root) + " is not in a world of 1");
  return device_copy("broadcast", buf, nullptr, count, dtype);
}
troupe::Status SimCommunicator::send(const void*, int64_t, troupe::DType, int peer) {
  return troupe::invalid_argument("sim send: peer " + std::to_string(peer) + " is not in a world of 1 rank");
}
troupe::Status SimCommunicator::recv(void*, int64_t, troupe::DType, int peer) {
  return troupe::invalid_argument("sim recv: peer " + std::to_string(peer) + " is not in a world of 1 rank");
}

}  // namespace sim
