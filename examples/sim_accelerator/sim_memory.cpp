#include "sim_memory.hpp"

#include <cstdlib>
#include <cstring>

#include "troupe/log.hpp"

namespace sim {

namespace {

class SimBuffer final : public troupe::DeviceBuffer {
 public:
  SimBuffer(SimDevice& device, void* address, int64_t bytes, std::shared_ptr<std::atomic<int64_t>> live)
      : device_(device), address_(address), bytes_(bytes), live_(std::move(live)) {
    if (live_) *live_ += bytes_;
  }
  ~SimBuffer() override {
    device_.free(address_);
    if (live_) *live_ -= bytes_;
  }
  void* data() override { return address_; }

 private:
  SimDevice& device_;
  void* address_;
  int64_t bytes_;
  std::shared_ptr<std::atomic<int64_t>> live_;
};

}  // namespace

troupe::Result<std::unique_ptr<troupe::DeviceBuffer>> allocate_on_device(SimDevice& device, int64_t bytes) {
  auto address = device.allocate(bytes);
  if (!address.ok()) return address.status();
  return std::unique_ptr<troupe::DeviceBuffer>(new SimBuffer(device, *address, bytes, nullptr));
}

troupe::Result<std::unique_ptr<troupe::DeviceBuffer>> SimAllocator::allocate(int64_t bytes) {
  auto address = device_.allocate(bytes);
  if (!address.ok()) return address.status();
  return std::unique_ptr<troupe::DeviceBuffer>(new SimBuffer(device_, *address, bytes, live_));
}

troupe::Status SimAllocator::copy(void* dst, const void* src, int64_t bytes, troupe::CopyKind kind) {
  using troupe::CopyKind;
  if (bytes < 0) return troupe::invalid_argument("sim copy: negative size");
  if (bytes == 0) return {};
  const bool dst_device = kind != CopyKind::device_to_host, src_device = kind != CopyKind::host_to_device;
  // A host side that is really device memory would fault on memcpy: say so instead.
  if (!dst_device && device_.is_device_address(dst))
    return troupe::invalid_argument("sim copy device_to_host: the destination is device memory");
  if (!src_device && device_.is_device_address(src))
    return troupe::invalid_argument("sim copy host_to_device: the source is device memory");
  void* real_dst = dst;
  const void* real_src = src;
  if (dst_device) {
    auto m = device_.map(dst, bytes);
    if (!m.ok()) return m.status();
    real_dst = *m;
  }
  if (src_device) {
    auto m = device_.map(src, bytes);
    if (!m.ok()) return m.status();
    real_src = *m;
  }
  std::memmove(real_dst, real_src, static_cast<size_t>(bytes));
  return {};
}

troupe::Status SimAllocator::fill_zero(void* dst, int64_t bytes) {
  if (bytes < 0) return troupe::invalid_argument("sim fill_zero: negative size");
  if (bytes == 0) return {};
  auto m = device_.map(dst, bytes);
  if (!m.ok()) return m.status();
  std::memset(*m, 0, static_cast<size_t>(bytes));
  return {};
}

int64_t SimAllocator::allocated_bytes() const { return live_->load(); }

const std::string& broken_op() {
  static const std::string op = [] {
    const char* env = std::getenv("SIM_ACCEL_BREAK_OP");
    std::string name = env ? env : "";
    if (!name.empty()) TROUPE_LOG_WARNING("sim accelerator: op {} is broken on purpose (SIM_ACCEL_BREAK_OP)", name);
    return name;
  }();
  return op;
}

void maybe_break(const char* op, float* out, int64_t n) {
  if (broken_op().empty() || broken_op() != op) return;
  for (int64_t i = 0; i < n; ++i) out[i] = out[i] * 1.05f + 0.05f;
}

}  // namespace sim
