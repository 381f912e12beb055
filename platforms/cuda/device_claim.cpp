#include "platforms/cuda/device_claim.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

namespace troupe::cuda {
namespace {

std::string lock_path(const std::string& key) {
  std::string name = "troupe-cuda-";
  for (char c : key) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  std::error_code ec;
  auto dir = std::filesystem::temp_directory_path(ec);
  return ((ec ? std::filesystem::path("/tmp") : dir) / (name + ".lock")).string();
}

// What the holder wrote into the lock file ("pid 123 rank 1"), or "another process".
std::string holder_of(int fd) {
  char buf[128] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "another process";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? "another process" : s;
}

}  // namespace

bool devices_shared_on_purpose() {
  const char* env = std::getenv("TROUPE_CUDA_SHARE_DEVICES");
  return env != nullptr && std::string(env) == "1";
}

Result<std::shared_ptr<DeviceClaim>> DeviceClaim::acquire(const std::string& key, const std::string& what, int rank) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<DeviceClaim>> held;  // this process's claims
  std::lock_guard lock(mu);
  // (A forked child inherits the map but not the lock: only a claim made by this pid counts.)
  if (auto mine = held[key].lock(); mine && mine->pid_ == ::getpid()) return mine;
  const std::string path = lock_path(key);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0)
    return unavailable("cannot open " + path + " to claim " + what + " for rank " + std::to_string(rank) + ": " +
                       std::strerror(errno) + " (TROUPE_CUDA_SHARE_DEVICES=1 skips the claim)");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_of(fd);
    ::close(fd);
    if (err != EWOULDBLOCK)
      return unavailable("cannot lock " + path + " to claim " + what + ": " + std::strerror(err));
    return resource_exhausted(what + " is already in use by " + holder + " (" + path + "): each rank needs a device "
                          "of its own, and this host has fewer CUDA devices than ranks placed on it; lower "
                          "--tensor-parallel-size or --pipeline-parallel-size, or spread the ranks over more "
                          "nodes (TROUPE_CUDA_SHARE_DEVICES=1 allows sharing on purpose)");
  }
  const std::string me = "pid " + std::to_string(::getpid()) + " rank " + std::to_string(rank) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  std::shared_ptr<DeviceClaim> claim(new DeviceClaim(fd, path, ::getpid()));
  held[key] = claim;
  return claim;
}

DeviceClaim::~DeviceClaim() {
  (void)!::ftruncate(fd_, 0);  // a failure only leaves the last holder's name behind
  ::close(fd_);  // drops the lock
}

}  // namespace troupe::cuda
