// One rank per CUDA device on a host. Two ranks on one device break NCCL
// ("duplicate GPU") and halve each other's memory budget, and a host given more
// ranks than devices (rank r takes device r % count) would do exactly that. So
// a rank claims its device before using it: an flock(2) on a file named after
// the device's PCI bus id in the temporary directory, which every process of the
// host sees, whatever its CUDA_VISIBLE_DEVICES. The kernel drops the lock when
// the process dies, so a crashed rank never blocks the next one.
// Workers of one process share its claim (tests and platform-check build several
// in turn or side by side; a serving rank is one process). TROUPE_CUDA_SHARE_DEVICES=1
// turns the claim off (MPS, or sharing on purpose).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "troupe/status.hpp"

namespace troupe::cuda {

class DeviceClaim {
 public:
  /// Claims the device named `key` (a PCI bus id) for `rank`, or shares this process's claim
  /// of it; resource_exhausted naming the holder (pid and rank) when another process of this
  /// host holds it. `what` names the device in messages ("cuda:1").
  static Result<std::shared_ptr<DeviceClaim>> acquire(const std::string& key, const std::string& what, int rank);
  ~DeviceClaim();
  DeviceClaim(const DeviceClaim&) = delete;
  DeviceClaim& operator=(const DeviceClaim&) = delete;

  const std::string& path() const { return path_; }

 private:
  DeviceClaim(int fd, std::string path, int pid) : fd_(fd), path_(std::move(path)), pid_(pid) {}
  int fd_;
  std::string path_;
  int pid_;  // the process that took the lock
};

/// Whether TROUPE_CUDA_SHARE_DEVICES asks for no claims.
bool devices_shared_on_purpose();

}  // namespace troupe::cuda
