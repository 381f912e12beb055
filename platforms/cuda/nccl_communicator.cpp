#include "platforms/cuda/nccl_communicator.hpp"

#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "troupe/log.hpp"

namespace troupe::cuda {
namespace {

using Clock = std::chrono::steady_clock;

ncclComm_t as_comm(void* c) { return static_cast<ncclComm_t>(c); }

std::string nccl_text(ncclResult_t r) {
  return std::string(ncclGetErrorString(r)) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

// Element count and NCCL type of `count` elements of `dtype`: float types as themselves,
// anything else (quantized blocks) as bytes, which only moves, never sums.
struct Wire {
  size_t count = 0;
  ncclDataType_t type = ncclUint8;
  bool summable = false;
};

Result<Wire> wire(int64_t count, DType dtype) {
  if (count < 0) return invalid_argument("communicator: negative element count");
  switch (dtype) {
    case DType::f32: return Wire{static_cast<size_t>(count), ncclFloat32, true};
    case DType::f16: return Wire{static_cast<size_t>(count), ncclFloat16, true};
    case DType::bf16: return Wire{static_cast<size_t>(count), ncclBfloat16, true};
    default: break;
  }
  const int64_t bytes = row_bytes(dtype, count);
  if (bytes < 0)
    return invalid_argument("communicator: " + std::to_string(count) + " elements of " + std::string(to_string(dtype)) +
                            " are not whole blocks");
  return Wire{static_cast<size_t>(bytes), ncclUint8, false};
}

int64_t element_bytes_of(const Wire& w) {
  switch (w.type) {
    case ncclFloat32: return 4;
    case ncclFloat16: return 2;
    case ncclBfloat16: return 2;
    default: return 1;
  }
}

// Waits until `comm` has left ncclInProgress (non-blocking init, split, finalize, enqueue).
Status wait_comm(ncclComm_t comm, Clock::time_point deadline, const std::string& what) {
  for (int spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return internal_error(what + ": ncclCommGetAsyncError: " + nccl_text(r));
    if (state == ncclSuccess) return {};
    if (state != ncclInProgress) return internal_error(what + ": " + nccl_text(state));
    if (Clock::now() > deadline) return unavailable(what + ": timed out waiting for the other ranks");
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

Result<std::string> make_nccl_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return unavailable("ncclGetUniqueId: " + nccl_text(r));
  static const char* hex = "0123456789abcdef";
  std::string s = kNcclIdPrefix;
  for (size_t i = 0; i < sizeof id.internal; ++i) {
    const auto b = static_cast<unsigned char>(id.internal[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

Result<std::chrono::milliseconds> nccl_timeout_from_env() {
  const char* v = std::getenv("TROUPE_NCCL_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return std::chrono::milliseconds(600'000);
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 1e7)
    return invalid_argument(std::string("TROUPE_NCCL_TIMEOUT_S='") + v + "' is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(const std::string& id, int world, int rank,
                                                                   std::shared_ptr<CudaContext> ctx,
                                                                   std::chrono::milliseconds timeout) {
  if (world < 1 || rank < 0 || rank >= world)
    return invalid_argument("nccl: rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world));
  ncclUniqueId uid;
  const size_t prefix = std::strlen(kNcclIdPrefix);
  if (id.rfind(kNcclIdPrefix, 0) != 0 || id.size() != prefix + 2 * sizeof uid.internal ||
      id.find_first_not_of("0123456789abcdef", prefix) != std::string::npos)
    return invalid_argument("platform cuda: '" + id.substr(0, 40) + (id.size() > 40 ? "..." : "") +
                            "' is not an NCCL communicator id (nccl:<" + std::to_string(2 * sizeof uid.internal) +
                            " hex digits>, made by Platform::make_communicator_id)");
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < sizeof uid.internal; ++i)
    uid.internal[i] = static_cast<char>(nibble(id[prefix + 2 * i]) * 16 + nibble(id[prefix + 2 * i + 1]));
  TROUPE_RETURN_IF_ERROR(ctx->make_current());
  ncclComm_t comm = nullptr;
  ncclConfig_t config = nonblocking_config();
  const ncclResult_t r = ncclCommInitRankConfig(&comm, world, uid, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return internal_error("ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " + std::to_string(world) +
                          "): " + nccl_text(r));
  }
  const Status joined = wait_comm(comm, Clock::now() + timeout,
                                  "nccl: rank " + std::to_string(rank) + " of " + std::to_string(world) + " joining");
  if (!joined.ok()) {
    (void)ncclCommAbort(comm);
    return joined;
  }
  TROUPE_LOG_INFO("nccl communicator: rank {} of {} on {} (NCCL {})", rank, world, ctx->name(), NCCL_VERSION_CODE);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, world, rank, std::move(ctx), timeout));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  (void)ctx_->make_current();
  ncclComm_t comm = as_comm(comm_);
  if (broken_.ok()) {
    // Finalize waits for the peers' outstanding work: bounded, then abort.
    const bool done = ncclCommFinalize(comm) != ncclSuccess
                          ? false
                          : wait_comm(comm, Clock::now() + std::min(timeout_, std::chrono::milliseconds(10'000)),
                                      "nccl finalize")
                                .ok();
    if (done) {
      (void)ncclCommDestroy(comm);
      return;
    }
  }
  (void)ncclCommAbort(comm);
}

Status NcclCommunicator::usable() const {
  if (!broken_.ok()) return broken_;
  return ctx_->make_current();
}

Status NcclCommunicator::fail(Status s) {
  if (broken_.ok()) {
    broken_ = Status(s.code(), "nccl rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
                                   " is broken: " + s.message());
    TROUPE_LOG_ERROR("{}", broken_.to_string());
    (void)ncclCommAbort(as_comm(comm_));
    comm_ = nullptr;
  }
  return broken_;
}

Status NcclCommunicator::finish(int result, const char* what) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r != ncclSuccess && r != ncclInProgress) return fail(internal_error(std::string(what) + ": " + nccl_text(r)));
  const auto deadline = Clock::now() + timeout_;
  const Status enqueued = wait_comm(as_comm(comm_), deadline, what);
  if (!enqueued.ok()) return fail(enqueued);
  // Then the work itself on the stream, checking NCCL's error state while it runs.
  for (int spins = 0;; ++spins) {
    const cudaError_t q = cudaStreamQuery(ctx_->stream());
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady) return fail(cuda_check(q, std::string(what) + " on " + ctx_->name()));
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(as_comm(comm_), &state) != ncclSuccess ||
        (state != ncclSuccess && state != ncclInProgress))
      return fail(internal_error(std::string(what) + ": " + nccl_text(state)));
    if (Clock::now() > deadline) return fail(unavailable(std::string(what) + ": timed out waiting for the other ranks"));
    if (spins < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

Status NcclCommunicator::all_reduce(void* buf, int64_t count, DType dtype) {
  TROUPE_RETURN_IF_ERROR(usable());
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (!w->summable) return not_supported("nccl all_reduce sums f32, f16 or bf16, not " + std::string(to_string(dtype)));
  if (w->count == 0) return {};
  return finish(ncclAllReduce(buf, buf, w->count, w->type, ncclSum, as_comm(comm_), ctx_->stream()),
                "ncclAllReduce");
}

Status NcclCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  TROUPE_RETURN_IF_ERROR(usable());
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (w->count == 0) return {};
  return finish(ncclAllGather(in, out, w->count, w->type, as_comm(comm_), ctx_->stream()), "ncclAllGather");
}

Status NcclCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype) {
  TROUPE_RETURN_IF_ERROR(usable());
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (!w->summable)
    return not_supported("nccl reduce_scatter sums f32, f16 or bf16, not " + std::string(to_string(dtype)));
  if (w->count == 0) return {};
  return finish(ncclReduceScatter(in, out, w->count, w->type, ncclSum, as_comm(comm_), ctx_->stream()),
                "ncclReduceScatter");
}

Status NcclCommunicator::gather(const void* in, void* out, int64_t count, DType dtype, int root) {
  TROUPE_RETURN_IF_ERROR(usable());
  if (root < 0 || root >= world_) return invalid_argument("gather: root " + std::to_string(root) + " is outside the world");
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (w->count == 0) return {};
  const int64_t chunk = static_cast<int64_t>(w->count) * element_bytes_of(*w);
  if (rank_ == root) {
    auto* dst = static_cast<uint8_t*>(out) + int64_t{root} * chunk;
    if (dst != in)
      TROUPE_RETURN_IF_ERROR(cuda_check(
          cudaMemcpyAsync(dst, in, static_cast<size_t>(chunk), cudaMemcpyDeviceToDevice, ctx_->stream()),
          "gather: the root's own part"));
  }
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) {
    if (rank_ == root) {
      for (int peer = 0; peer < world_ && r == ncclSuccess; ++peer)
        if (peer != root)
          r = ncclRecv(static_cast<uint8_t*>(out) + int64_t{peer} * chunk, w->count, w->type, peer, as_comm(comm_),
                       ctx_->stream());
    } else {
      r = ncclSend(in, w->count, w->type, root, as_comm(comm_), ctx_->stream());
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess) r = end;
  }
  return finish(r, "nccl gather");
}

Status NcclCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  TROUPE_RETURN_IF_ERROR(usable());
  if (root < 0 || root >= world_)
    return invalid_argument("broadcast: root " + std::to_string(root) + " is outside the world");
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (w->count == 0) return {};
  return finish(ncclBroadcast(buf, buf, w->count, w->type, root, as_comm(comm_), ctx_->stream()), "ncclBroadcast");
}

Status NcclCommunicator::send(const void* buf, int64_t count, DType dtype, int peer) {
  TROUPE_RETURN_IF_ERROR(usable());
  if (peer < 0 || peer >= world_ || peer == rank_)
    return invalid_argument("send: rank " + std::to_string(peer) + " is not a peer of rank " + std::to_string(rank_));
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (w->count == 0) return {};
  return finish(ncclSend(buf, w->count, w->type, peer, as_comm(comm_), ctx_->stream()), "ncclSend");
}

Status NcclCommunicator::recv(void* buf, int64_t count, DType dtype, int peer) {
  TROUPE_RETURN_IF_ERROR(usable());
  if (peer < 0 || peer >= world_ || peer == rank_)
    return invalid_argument("recv: rank " + std::to_string(peer) + " is not a peer of rank " + std::to_string(rank_));
  auto w = wire(count, dtype);
  if (!w.ok()) return w.status();
  if (w->count == 0) return {};
  return finish(ncclRecv(buf, w->count, w->type, peer, as_comm(comm_), ctx_->stream()), "ncclRecv");
}

Result<std::unique_ptr<DeviceCommunicator>> NcclCommunicator::new_group(const std::vector<int>& ranks) {
  TROUPE_RETURN_IF_ERROR(usable());
  const std::set<int> unique(ranks.begin(), ranks.end());
  if (ranks.empty() || unique.size() != ranks.size() || *unique.begin() < 0 || *unique.rbegin() >= world_)
    return invalid_argument("new_group: the ranks must be distinct ranks of this communicator");
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end())
    return invalid_argument("new_group: rank " + std::to_string(rank_) + " is not in the group it makes");
  const int key = static_cast<int>(me - ranks.begin());
  ncclComm_t group = nullptr;
  ncclConfig_t config = nonblocking_config();
  const ncclResult_t r = ncclCommSplit(as_comm(comm_), *unique.begin(), key, &group, &config);
  if (r != ncclSuccess && r != ncclInProgress) return fail(internal_error("ncclCommSplit: " + nccl_text(r)));
  const auto deadline = Clock::now() + timeout_;
  Status split = wait_comm(as_comm(comm_), deadline, "ncclCommSplit");
  if (split.ok() && group != nullptr) split = wait_comm(group, deadline, "ncclCommSplit (the new group)");
  if (!split.ok()) {
    if (group != nullptr) (void)ncclCommAbort(group);
    return fail(split);
  }
  if (group == nullptr) return internal_error("ncclCommSplit gave no communicator");
  return std::unique_ptr<DeviceCommunicator>(
      new NcclCommunicator(group, static_cast<int>(ranks.size()), key, ctx_, timeout_));
}

}  // namespace troupe::cuda
