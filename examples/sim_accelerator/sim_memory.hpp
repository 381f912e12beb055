// The sim accelerator's DeviceAllocator (explicit copies between the host and
// the device, through the device's translation), and the helpers its ops use
// to reach device memory and to break an op on purpose.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "sim_device.hpp"
#include "troupe/device_memory.hpp"

namespace sim {

class SimAllocator final : public troupe::DeviceAllocator {
 public:
  explicit SimAllocator(SimDevice& device) : device_(device) {}
  std::string name() const override { return "sim:0"; }
  bool host_addressable() const override { return false; }
  troupe::Result<std::unique_ptr<troupe::DeviceBuffer>> allocate(int64_t bytes) override;
  /// The device side of `kind` must be live sim memory, the host side must not be sim memory.
  troupe::Status copy(void* dst, const void* src, int64_t bytes, troupe::CopyKind kind) override;
  troupe::Status fill_zero(void* dst, int64_t bytes) override;
  int64_t allocated_bytes() const override;

 private:
  SimDevice& device_;
  std::shared_ptr<std::atomic<int64_t>> live_ = std::make_shared<std::atomic<int64_t>>(0);
};

/// A buffer of the sim device that is not an allocator's (the KV cache).
troupe::Result<std::unique_ptr<troupe::DeviceBuffer>> allocate_on_device(SimDevice& device, int64_t bytes);

/// The op SIM_ACCEL_BREAK_OP names ("rms_norm", "paged_attention", "all_gather"...), or "".
const std::string& broken_op();
/// When `op` is the broken one: spoils its output (every value off by 5% and 0.05).
void maybe_break(const char* op, float* out, int64_t n);

/// Typed views of device memory for kernels: abort naming `op` on memory that is not the device's.
inline float* dev_f32(SimDevice& d, const float* p, int64_t n, const char* op) {
  return reinterpret_cast<float*>(d.must_map(p, n * int64_t{sizeof(float)}, op));
}

}  // namespace sim
