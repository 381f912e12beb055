#include "troupe/metered_communicator.hpp"

#include <chrono>

#include "troupe/dtype.hpp"

namespace troupe {

MeteredCommunicator::MeteredCommunicator(std::unique_ptr<DeviceCommunicator> inner,
                                         std::shared_ptr<CommunicatorMeter> meter)
    : inner_(std::move(inner)), meter_(std::move(meter)) {}

template <class F>
Status MeteredCommunicator::timed(int64_t count, DType dtype, F&& call) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = call();
  meter_->nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                             .count();
  if (auto t = dtype_traits(static_cast<uint32_t>(dtype)))
    meter_->bytes += count / t->block_elems * t->block_bytes;
  return s;
}

Status MeteredCommunicator::all_reduce(void* buf, int64_t count, DType dtype) {
  return timed(count, dtype, [&] { return inner_->all_reduce(buf, count, dtype); });
}
Status MeteredCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  return timed(count, dtype, [&] { return inner_->all_gather(in, out, count, dtype); });
}
Status MeteredCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype) {
  return timed(count, dtype, [&] { return inner_->reduce_scatter(in, out, count, dtype); });
}
Status MeteredCommunicator::gather(const void* in, void* out, int64_t count, DType dtype, int root) {
  return timed(count, dtype, [&] { return inner_->gather(in, out, count, dtype, root); });
}
Status MeteredCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  return timed(count, dtype, [&] { return inner_->broadcast(buf, count, dtype, root); });
}
Status MeteredCommunicator::send(const void* buf, int64_t count, DType dtype, int peer) {
  return timed(count, dtype, [&] { return inner_->send(buf, count, dtype, peer); });
}
Status MeteredCommunicator::recv(void* buf, int64_t count, DType dtype, int peer) {
  return timed(count, dtype, [&] { return inner_->recv(buf, count, dtype, peer); });
}

Result<std::unique_ptr<DeviceCommunicator>> MeteredCommunicator::new_group(const std::vector<int>& ranks) {
  auto group = inner_->new_group(ranks);
  if (!group) return group.status();
  return std::unique_ptr<DeviceCommunicator>(new MeteredCommunicator(std::move(group).value(), meter_));
}

}  // namespace troupe
