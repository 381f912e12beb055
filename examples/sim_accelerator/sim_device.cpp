#include "sim_device.hpp"

#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#include "troupe/check.hpp"

namespace sim {

namespace {
constexpr int64_t kAlign = 256;
}

SimDevice* SimDevice::get(std::string* why_not) {
  static std::string error;
  static SimDevice* device = []() -> SimDevice* {
    int64_t mib = 2048;
    if (const char* env = std::getenv("SIM_ACCEL_MEMORY_MB"); env && *env) {
      char* end = nullptr;
      const long long v = std::strtoll(env, &end, 10);
      if (end == env || *end != '\0' || v < 16 || v > (1LL << 20)) {
        error = std::string("SIM_ACCEL_MEMORY_MB must be a number of MiB in [16, 1048576], got '") + env + "'";
        return nullptr;
      }
      mib = v;
    }
    const auto bytes = static_cast<size_t>(mib) << 20;
    // The address space the core sees: reserved, never accessible.
    void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      error = "cannot reserve " + std::to_string(mib) + " MiB of address space for the sim device: " + strerror(errno);
      return nullptr;
    }
    // The device's real bytes, somewhere else; pages are committed when first written.
    void* backing = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (backing == MAP_FAILED) {
      munmap(base, bytes);
      error = "cannot map " + std::to_string(mib) + " MiB for the sim device's memory: " + strerror(errno);
      return nullptr;
    }
    // Leaked on purpose, like every platform: it lives as long as the process.
    return new SimDevice(static_cast<uint8_t*>(base), static_cast<uint8_t*>(backing), static_cast<int64_t>(bytes));
  }();
  if (!device && why_not) *why_not = error;
  return device;
}

int64_t SimDevice::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

troupe::Result<void*> SimDevice::allocate(int64_t bytes) {
  if (bytes <= 0) return troupe::invalid_argument("sim device: allocation of " + std::to_string(bytes) + " bytes");
  const int64_t size = (bytes + kAlign - 1) / kAlign * kAlign;
  std::lock_guard lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {  // first fit
    if (it->second < size) continue;
    const int64_t offset = it->first, left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[offset + size] = left;
    live_[offset] = size;
    used_ += size;
    return static_cast<void*>(base_ + offset);
  }
  return troupe::resource_exhausted("sim device: no room for " + std::to_string(bytes) + " bytes (" +
                                    std::to_string(used_ >> 20) + " MiB of " + std::to_string(capacity_ >> 20) +
                                    " MiB in use)");
}

void SimDevice::free(void* device_address) {
  const int64_t offset = static_cast<uint8_t*>(device_address) - base_;
  std::lock_guard lock(mu_);
  auto it = live_.find(offset);
  TROUPE_CHECK(it != live_.end(), "sim device: free of an address that is not a live allocation");
  const int64_t size = it->second;
  live_.erase(it);
  used_ -= size;
  auto [at, inserted] = free_.emplace(offset, size);
  TROUPE_CHECK(inserted, "sim device: free list corrupted");
  // Coalesce with the neighbours.
  if (auto next = std::next(at); next != free_.end() && at->first + at->second == next->first) {
    at->second += next->second;
    free_.erase(next);
  }
  if (at != free_.begin()) {
    auto prev = std::prev(at);
    if (prev->first + prev->second == at->first) {
      prev->second += at->second;
      free_.erase(at);
    }
  }
}

bool SimDevice::is_device_address(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return b >= base_ && b < base_ + capacity_;
}

troupe::Result<uint8_t*> SimDevice::map(const void* device_address, int64_t bytes) const {
  char where[64];
  std::snprintf(where, sizeof where, "%p", device_address);
  if (!is_device_address(device_address))
    return troupe::invalid_argument(std::string("sim device: ") + where + " is not a sim device address");
  if (bytes < 0) return troupe::invalid_argument("sim device: negative size");
  const int64_t offset = static_cast<const uint8_t*>(device_address) - base_;
  std::lock_guard lock(mu_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin())
    return troupe::invalid_argument(std::string("sim device: ") + where + " is not inside a live allocation");
  --it;
  if (offset + bytes > it->first + it->second)
    return troupe::out_of_range(std::string("sim device: ") + std::to_string(bytes) + " bytes at " + where +
                                " run past the end of their allocation of " + std::to_string(it->second) + " bytes");
  return backing_ + offset;
}

uint8_t* SimDevice::must_map(const void* device_address, int64_t bytes, const char* op) const {
  if (bytes == 0) return nullptr;
  auto real = map(device_address, bytes);
  if (!real.ok()) {
    std::fprintf(stderr, "sim accelerator: op %s: %s\n", op, real.status().message().c_str());
    std::abort();
  }
  return *real;
}

namespace {
float half_to_float_slow(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
  } else if (exp == 31) {
    magnitude = mant ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
}  // namespace

float half_to_float(uint16_t h) {
  static const std::vector<float> table = [] {  // every half, converted once
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float_slow(static_cast<uint16_t>(i));
    return t;
  }();
  return table[h];
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal (or zero): units of 2^-24, rounded to nearest even by nearbyint.
    const auto m = static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
    return static_cast<uint16_t>(sign | m);  // m may reach 0x400: the smallest normal, as it should
  }
  int e;
  const float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  // 11 significant bits: mantissa in units of 2^(e-11), rounded to nearest even.
  auto m = static_cast<uint32_t>(std::nearbyint(std::ldexp(frac, 11)));
  if (m == 2048) {  // rounding carried into the next binade
    m = 1024;
    ++e;
  }
  const uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (exp << 10) | (m & 0x3ffu));
}

}  // namespace sim
