// One rank of the NCCL communicator test (nccl_communicator_test starts two):
//   nccl_rank_main ID WORLD RANK
// On device RANK, joins the world at ID and runs every collective on device
// memory, checking each result against what the ranks' known inputs give.
// Prints "RESULT ok" or "RESULT <what failed>"; exits 0 only when all held.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "platforms/cuda/cuda_allocator.hpp"
#include "platforms/cuda/nccl_communicator.hpp"
#include "tests/platforms/cuda/cuda_test_device.hpp"

using namespace troupe;
using namespace troupe::cuda;
namespace dev = troupe::cuda::testing;

namespace {

int fail(const std::string& what) {
  std::printf("RESULT %s\n", what.c_str());
  std::fflush(stdout);
  return 1;
}

// Rank r's input element i: distinct per rank and element, exact in f32 sums.
float input(int r, int64_t i) { return static_cast<float>(r * 1000 + i); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: nccl_rank_main ID WORLD RANK");
  const std::string id = argv[1];
  const int world = std::atoi(argv[2]), rank = std::atoi(argv[3]);
  auto ctx = CudaContext::for_device(rank);
  if (!ctx.ok()) return fail(ctx.status().to_string());
  if (!(*ctx)->make_current().ok()) return fail("make_current");
  auto made = NcclCommunicator::create(id, world, rank, *ctx, std::chrono::seconds(60));
  if (!made.ok()) return fail("create: " + made.status().to_string());
  NcclCommunicator& comm = **made;
  CudaAllocator mem(*ctx);
  const int64_t n = 1000;
  std::vector<float> mine(n);
  for (int64_t i = 0; i < n; ++i) mine[i] = input(rank, i);
  auto check = [&](const char* what, const DeviceArray<float>& got, const std::vector<float>& want) -> std::string {
    auto host = dev::download(mem, got);
    if (host.size() < want.size()) return std::string(what) + ": copy back failed";
    for (size_t i = 0; i < want.size(); ++i)
      if (host[i] != want[i])
        return std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(host[i]) + ", not " +
               std::to_string(want[i]);
    return "";
  };
  std::string bad;
  {  // all_reduce
    auto buf = dev::upload(mem, mine);
    if (!comm.all_reduce(buf.data(), n, DType::f32).ok()) return fail("all_reduce failed");
    std::vector<float> want(n, 0.0f);
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < n; ++i) want[i] += input(r, i);
    if (!(bad = check("all_reduce", buf, want)).empty()) return fail(bad);
  }
  {  // all_gather and gather at the last rank
    auto in = dev::upload(mem, mine);
    DeviceArray<float> out;
    if (!out.allocate(mem, n * world).ok()) return fail("allocate");
    if (!comm.all_gather(in.data(), out.data(), n, DType::f32).ok()) return fail("all_gather failed");
    std::vector<float> want;
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < n; ++i) want.push_back(input(r, i));
    if (!(bad = check("all_gather", out, want)).empty()) return fail(bad);
    if (!mem.fill_zero(out.data(), n * world * 4).ok()) return fail("fill_zero");
    if (!comm.gather(in.data(), out.data(), n, DType::f32, world - 1).ok()) return fail("gather failed");
    if (rank == world - 1 && !(bad = check("gather", out, want)).empty()) return fail(bad);
  }
  {  // reduce_scatter: rank r keeps block r of the sum of every rank's world * n elements
    std::vector<float> big(n * world);
    for (int64_t i = 0; i < n * world; ++i) big[i] = input(rank, i);
    auto in = dev::upload(mem, big);
    DeviceArray<float> out;
    if (!out.allocate(mem, n).ok()) return fail("allocate");
    if (!comm.reduce_scatter(in.data(), out.data(), n, DType::f32).ok()) return fail("reduce_scatter failed");
    std::vector<float> want(n, 0.0f);
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < n; ++i) want[i] += input(r, rank * n + i);
    if (!(bad = check("reduce_scatter", out, want)).empty()) return fail(bad);
  }
  {  // broadcast from rank 1, send/recv around the ring
    auto buf = dev::upload(mem, mine);
    if (!comm.broadcast(buf.data(), n, DType::f32, 1).ok()) return fail("broadcast failed");
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = input(1, i);
    if (!(bad = check("broadcast", buf, want)).empty()) return fail(bad);
    auto out = dev::upload(mem, mine);
    DeviceArray<float> got;
    if (!got.allocate(mem, n).ok()) return fail("allocate");
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    // Even ranks send first, odd ranks receive first: no cycle of waits.
    Status a = rank % 2 == 0 ? comm.send(out.data(), n, DType::f32, next) : comm.recv(got.data(), n, DType::f32, prev);
    Status b = rank % 2 == 0 ? comm.recv(got.data(), n, DType::f32, prev) : comm.send(out.data(), n, DType::f32, next);
    if (!a.ok() || !b.ok()) return fail("send/recv failed: " + (a.ok() ? b : a).to_string());
    for (int64_t i = 0; i < n; ++i) want[i] = input(prev, i);
    if (!(bad = check("send/recv", got, want)).empty()) return fail(bad);
  }
  {  // new_group: every rank alone in its own group, then an all_reduce in it changes nothing
    auto group = comm.new_group({rank});
    if (!group.ok()) return fail("new_group: " + group.status().to_string());
    if ((*group)->world_size() != 1 || (*group)->rank() != 0) return fail("new_group: wrong shape");
    auto buf = dev::upload(mem, mine);
    if (!(*group)->all_reduce(buf.data(), n, DType::f32).ok()) return fail("group all_reduce failed");
    if (!(bad = check("group all_reduce", buf, mine)).empty()) return fail(bad);
  }
  // Refusals: a peer outside the world, a sum of quantized blocks.
  if (comm.send(mine.data(), n, DType::f32, world).code() != StatusCode::invalid_argument)
    return fail("a send outside the world was not refused");
  if (comm.all_reduce(nullptr, 32, DType::q8_0).code() != StatusCode::not_supported)
    return fail("an all_reduce of q8_0 was not refused");
  std::printf("RESULT ok\n");
  return 0;
}
