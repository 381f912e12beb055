// One CUDA device as the cuda platform's parts share it: the stream every op,
// copy, attention step and NCCL collective of a worker is enqueued on (so they
// are ordered without events), a cuBLAS handle, the staging of the small host
// arrays of a step (token ids, positions, block tables) into device memory, and
// the first error of the void-returning Ops methods.
//
// Staging: a pinned host ring and a device ring of the same size. stage() copies
// the host bytes into the pinned ring (memcpy), enqueues one cudaMemcpyAsync of
// them to the same offset of the device ring, and returns that device address,
// valid for every kernel enqueued after it. A region is reused only after the
// stream has drained past it: when the ring wraps the stream is synchronized
// first, and note_synchronized() (after a copy to the host, which waits for the
// stream anyway) starts the ring over for free. The last few stagings are
// remembered: staging the same bytes again (rope's positions for q and k, one
// layer after another) returns the same device address with no copy.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/blas.hpp"
#include "troupe/status.hpp"

namespace troupe::cuda {

class CudaContext {
 public:
  /// The process's context of `device` (made on first use, never destroyed before exit:
  /// CUDA objects must not be torn down by static destructors after the runtime has gone).
  static Result<std::shared_ptr<CudaContext>> for_device(int device);
  /// The context of the device current on this thread (cudaGetDevice).
  static Result<std::shared_ptr<CudaContext>> current();

  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  /// "cuda:<device>".
  std::string name() const { return "cuda:" + std::to_string(device_); }
  cudaStream_t stream() const { return stream_; }
  /// Makes this device current on the calling thread (cudaSetDevice only when another one is).
  Status make_current() const;
  /// Waits for everything enqueued on the stream; then the staging ring starts over.
  Status synchronize();
  /// The stream is known to be idle (a blocking copy to the host just returned).
  void note_synchronized();

  /// Device memory holding a copy of `bytes` host bytes at `host`, for kernels enqueued on
  /// stream() after this call (see the file comment). bytes == 0 gives a valid dummy address.
  Result<const void*> stage(const void* host, int64_t bytes);

  /// Grows the staging ring to at least `bytes` (synchronizing once, now): sized for the
  /// largest step, a step never wraps the ring, which would wait for the stream mid-step.
  Status reserve_staging(int64_t bytes);
  int64_t staging_bytes() const { return ring_bytes_; }

  /// A host array a CUDA graph reads from a fixed device buffer (CudaGraphRunner).
  struct GraphInput {
    const void* host = nullptr;
    int64_t bytes = 0;
    void* device = nullptr;
  };
  /// While a graph is captured, stage() answers a host pointer of `inputs` with its device
  /// buffer and no copy (each replay reads whatever the buffer then holds), and refuses any
  /// other: a copy captured from the staging ring would replay stale bytes.
  void begin_graph_inputs(std::vector<GraphInput> inputs);
  void end_graph_inputs();
  bool capturing_graph() const { return capturing_; }
  /// Device memory that kernels read (buffers, scratch, the KV cache) gets a serial when
  /// allocated. Freeing memory allocated before the last graph capture bumps the epoch: a
  /// graph captured at another epoch may point at freed memory. Memory allocated after
  /// every capture cannot be in a graph, and freeing it changes nothing.
  uint64_t allocation_serial() { return ++allocation_serial_; }
  void mark_capture() { capture_mark_ = allocation_serial_.load(); }
  void note_memory_freed(uint64_t serial) {
    if (serial <= capture_mark_.load()) ++memory_epoch_;
  }
  uint64_t memory_epoch() const { return memory_epoch_.load(); }

  /// The cuBLAS handle of this device (created on first use).
  Result<kernels::cuda::CublasGemm*> blas();

  /// Records the first failure of an Ops call (Ops methods return nothing); logged once.
  void record(const Status& s);
  /// The recorded failure, cleared; ok when there was none.
  Status take_error();

 private:
  explicit CudaContext(int device) : device_(device) {}
  Status init();
  Status grow_ring(int64_t bytes);

  struct Staged {
    int64_t offset = 0;
    int64_t bytes = 0;
  };

  int device_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kernels::cuda::CublasGemm> blas_;
  // Staging ring: pinned host bytes and device bytes of the same size.
  uint8_t* ring_host_ = nullptr;
  uint8_t* ring_device_ = nullptr;
  int64_t ring_bytes_ = 0;
  int64_t ring_at_ = 0;
  std::vector<Staged> recent_;  // the last stagings, newest last (reset with the ring)
  bool capturing_ = false;
  std::vector<GraphInput> graph_inputs_;
  std::atomic<uint64_t> memory_epoch_{0};
  std::atomic<uint64_t> allocation_serial_{0};
  std::atomic<uint64_t> capture_mark_{0};
  std::mutex error_mu_;
  Status error_;
  std::atomic<bool> has_error_{false};
};

/// Status of a CUDA runtime call, naming `what` and the device.
Status cuda_check(cudaError_t err, const std::string& what);

}  // namespace troupe::cuda
