#include "platforms/cpu/host_communicator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "platforms/cpu/cpu_communicator.hpp"

namespace troupe::cpu {

using std::chrono::milliseconds;

Result<milliseconds> comm_timeout_from_env() {
  const char* env = std::getenv("TROUPE_CPU_COMM_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return milliseconds(600'000);
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  if (end == env || *end != '\0' || !std::isfinite(s) || s <= 0 || s > 1e7)
    return invalid_argument(std::string("TROUPE_CPU_COMM_TIMEOUT_S must be a positive number of seconds, got '") +
                            env + "'");
  return milliseconds(std::max<int64_t>(1, static_cast<int64_t>(s * 1000.0)));
}

std::string seconds_text(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

const char* op_name(uint64_t op) {
  switch (op) {
    case kAllReduce: return "all_reduce";
    case kAllGather: return "all_gather";
    case kReduceScatter: return "reduce_scatter";
    case kGather: return "gather";
    case kBroadcast: return "broadcast";
    case kSend: return "send";
    default: return "an unknown operation";
  }
}

void ordered_sum(float* out, std::span<const float* const> s, int64_t n) {
  if (out != s[0]) std::memcpy(out, s[0], static_cast<size_t>(n) * sizeof(float));
  for (size_t r = 1; r < s.size(); ++r) {
    const float* in = s[r];
    for (int64_t i = 0; i < n; ++i) out[i] += in[i];
  }
}

HostCommunicator::HostCommunicator(std::string name, int rank, int world, int64_t max_call_bytes)
    : rank_(rank), world_(world), name_(std::move(name)), max_call_bytes_(max_call_bytes) {}

// -- Checks and the sticky failure ---------------------------------------------------------

Status HostCommunicator::usable() const {
  if (broken_.ok()) return {};
  return Status(broken_.code(), "cpu communicator " + name_ + " failed earlier: " + broken_.message());
}

Status HostCommunicator::fail(Status s) {
  if (!s.ok() && broken_.ok()) broken_ = s;
  return s;
}

Result<int64_t> HostCommunicator::bytes_of(const char* op, int64_t count, DType dtype) const {
  if (count < 0) return invalid_argument(std::string(op) + ": negative element count");
  const int64_t b = row_bytes(dtype, count);
  if (b < 0)
    return invalid_argument(std::string(op) + ": " + std::to_string(count) + " elements of " +
                            std::string(to_string(dtype)) + " are not a whole number of blocks");
  if (b > max_call_bytes_)
    return invalid_argument(std::string(op) + ": " + std::to_string(b) + " bytes are more than one call carries (" +
                            std::to_string(max_call_bytes_) + ")");
  return b;
}

Status HostCommunicator::check_root(const char* op, int root) const {
  if (root < 0 || root >= world_)
    return invalid_argument(std::string(op) + ": root " + std::to_string(root) + " is not a rank of a world of " +
                            std::to_string(world_));
  return {};
}

Status HostCommunicator::f32_only(const char* op, DType dtype) const {
  if (dtype != DType::f32)
    return not_supported(std::string(op) + " of " + std::string(to_string(dtype)) +
                         " on the cpu communicator (f32 only)");
  return {};
}

Status HostCommunicator::timed_out(Wait what, int peer, milliseconds timeout) const {
  const std::string me = std::to_string(rank_);
  std::string missed = " did not reach the collective";
  if (what == Wait::send) missed = " did not receive from rank " + me;
  if (what == Wait::recv) missed = " did not send to rank " + me;
  return unavailable("rank " + std::to_string(peer) + missed + " within " + seconds_text(timeout) + " s");
}

// -- The calls: checks, then the transport ----------------------------------------------------

Status HostCommunicator::all_reduce(void* buf, int64_t count, DType dtype) {
  TROUPE_RETURN_IF_ERROR(usable());
  TROUPE_RETURN_IF_ERROR(f32_only("all_reduce", dtype));
  auto b = bytes_of("all_reduce", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_all_reduce(static_cast<float*>(buf), count));
}

Status HostCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  TROUPE_RETURN_IF_ERROR(usable());
  auto b = bytes_of("all_gather", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_gather(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), *b, -1));
}

Status HostCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype) {
  TROUPE_RETURN_IF_ERROR(usable());
  TROUPE_RETURN_IF_ERROR(f32_only("reduce_scatter", dtype));
  auto b = bytes_of("reduce_scatter", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_reduce_scatter(static_cast<const float*>(in), static_cast<float*>(out), count));
}

Status HostCommunicator::gather(const void* in, void* out, int64_t count, DType dtype, int root) {
  TROUPE_RETURN_IF_ERROR(usable());
  TROUPE_RETURN_IF_ERROR(check_root("gather", root));
  auto b = bytes_of("gather", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_gather(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), *b, root));
}

Status HostCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  TROUPE_RETURN_IF_ERROR(usable());
  TROUPE_RETURN_IF_ERROR(check_root("broadcast", root));
  auto b = bytes_of("broadcast", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_broadcast(static_cast<uint8_t*>(buf), *b, root));
}

Status HostCommunicator::send(const void* buf, int64_t count, DType dtype, int peer) {
  TROUPE_RETURN_IF_ERROR(usable());
  if (peer < 0 || peer >= world_ || peer == rank_)
    return invalid_argument("send: rank " + std::to_string(rank_) + " cannot send to rank " + std::to_string(peer) +
                            " in a world of " + std::to_string(world_));
  auto b = bytes_of("send", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_send(static_cast<const uint8_t*>(buf), *b, peer));
}

Status HostCommunicator::recv(void* buf, int64_t count, DType dtype, int peer) {
  TROUPE_RETURN_IF_ERROR(usable());
  if (peer < 0 || peer >= world_ || peer == rank_)
    return invalid_argument("recv: rank " + std::to_string(rank_) + " cannot receive from rank " +
                            std::to_string(peer) + " in a world of " + std::to_string(world_));
  auto b = bytes_of("recv", count, dtype);
  if (!b.ok()) return b.status();
  if (*b == 0) return {};
  return fail(run_recv(static_cast<uint8_t*>(buf), *b, peer));
}

Result<std::unique_ptr<DeviceCommunicator>> HostCommunicator::new_group(const std::vector<int>& ranks) {
  TROUPE_RETURN_IF_ERROR(usable());
  std::vector<int> seen(static_cast<size_t>(world_), 0);
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= world_ || seen[static_cast<size_t>(r)]++)
      return invalid_argument("new_group: rank " + std::to_string(r) + " is not a distinct rank of a world of " +
                              std::to_string(world_));
    if (r == rank_) index = static_cast<int>(i);
  }
  if (index < 0) return invalid_argument("new_group: rank " + std::to_string(rank_) + " is not in the group");
  const int k = groups_made_++;
  if (ranks.size() == 1) return std::unique_ptr<DeviceCommunicator>(new CpuCommunicator());
  return make_group(ranks, index, k);
}

}  // namespace troupe::cpu
