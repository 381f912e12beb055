// SimDevice: the memory of the simulated accelerator. Device addresses live in
// a range reserved PROT_NONE (no access): the core can hold them, pass them
// around and do arithmetic on them, but any load or store through one faults.
// The bytes themselves are in a second, separate mapping; only this plugin's
// kernels and copies translate a device address into it. One device per
// process, shared by every allocator, attention backend and communicator.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "troupe/status.hpp"

namespace sim {

class SimDevice {
 public:
  /// The process's device, created on first use with SIM_ACCEL_MEMORY_MB MiB (default 2048).
  /// nullptr when it cannot be created; *why_not then says why.
  static SimDevice* get(std::string* why_not = nullptr);

  int64_t capacity() const { return capacity_; }
  int64_t used() const;
  /// `bytes` (> 0) of device memory, 256-byte aligned: a device address, never the host's.
  troupe::Result<void*> allocate(int64_t bytes);
  /// Frees an address allocate() returned; anything else aborts (a double free is a bug).
  void free(void* device_address);
  /// The real bytes behind [device_address, device_address + bytes), which must lie inside
  /// one live allocation; otherwise an error naming the address.
  troupe::Result<uint8_t*> map(const void* device_address, int64_t bytes) const;
  /// map() for kernels: a range outside the device's live memory is a broken invariant
  /// (the core passed host memory as device memory, or a shape is wrong): abort naming `op`.
  uint8_t* must_map(const void* device_address, int64_t bytes, const char* op) const;
  /// True when `p` points into the device address space (live or not).
  bool is_device_address(const void* p) const;

 private:
  SimDevice(uint8_t* device_base, uint8_t* backing, int64_t capacity)
      : base_(device_base), backing_(backing), capacity_(capacity) {
    free_[0] = capacity;
  }
  uint8_t* const base_;     // the PROT_NONE "device address space"
  uint8_t* const backing_;  // the real bytes, same size
  const int64_t capacity_;
  mutable std::mutex mu_;
  std::map<int64_t, int64_t> free_;  // offset -> size of free ranges, coalesced
  std::map<int64_t, int64_t> live_;  // offset -> size of live allocations
  int64_t used_ = 0;
};

/// Half and bfloat16 conversions of the kernels and the KV cache (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

}  // namespace sim
