// CUDA graphs of decode steps (vLLM's CUDA graph runner). A decode step of n
// sequences (one token each, every row's logits) replays the graph captured for
// the smallest size >= n, padded: extra rows have token 0, no KV slot (-1) and no
// block table, so they write nothing and read nothing. One launch replaces the
// step's hundreds of kernel launches.
//
// What a graph reads between replays lives in one fixed device buffer: the token
// ids, the positions and the attention backend's packed arrays (block tables
// `width` wide), laid out once for the largest size (cuda_graph_inputs.hpp).
// While capturing, the context answers the model's staging of ids and positions
// with that buffer (CudaContext::begin_graph_inputs) and the attention backend
// reads its image (set_graph_image). Before each replay the runner copies only
// the bytes that changed since the last step, from a pinned host mirror,
// straight to the buffer: no staging ring, so no stream sync. A graph captured
// before device memory was freed (the context's memory epoch) may point at freed
// memory: all graphs are then dropped and captured again on first use.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <vector>

#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_context.hpp"
#include "platforms/cuda/cuda_graph_inputs.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"

namespace troupe::cuda {

class CudaGraphRunner {
 public:
  /// The model's forward pass: logits of batch.logits_indices into `out` (device memory).
  using Forward = std::function<Status(const ForwardBatch& batch, float* out)>;

  /// vLLM's capture sizes: 1, 2, 4, then every multiple of 8 up to `max_batch`.
  static std::vector<int> capture_sizes(int max_batch);

  /// Buffers for batches up to the largest of `sizes`, tables `width` blocks wide, `vocab`
  /// logits per row, in `memory` (the worker's allocator, on ctx's device).
  static Result<std::unique_ptr<CudaGraphRunner>> create(std::shared_ptr<CudaContext> ctx,
                                                         CudaAttentionBackend* attention, DeviceAllocator& memory,
                                                         std::vector<int> sizes, size_t width, int64_t vocab);
  ~CudaGraphRunner();
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  /// Whether a graph can run `b`: one token per sequence, the logits of every row in order,
  /// no LoRA, at most the largest size, every table within the width.
  bool eligible(const ForwardBatch& b) const { return eligible(b, max_size(), width_); }
  /// The same for graphs of sizes up to `max_size`, tables `width` wide (host only).
  static bool eligible(const ForwardBatch& b, int max_size, size_t width);
  /// Captures the graph of `size` (one of the sizes) with `forward`; an error says why it
  /// cannot be (an op that stages other host data, an unsupported call while capturing...).
  Status capture(int size, const Forward& forward);
  /// Runs eligible `b` by replaying its size's graph (captured first when missing or
  /// stale), then copies its rows' logits to `out`.
  Status run(const ForwardBatch& b, float* out, const Forward& forward);

  /// The attention backend the graphs read; rebind() drops every graph and reads `attention`
  /// from now on (sleep mode builds a new backend on wake-up).
  CudaAttentionBackend* attention() const { return attention_; }
  void rebind(CudaAttentionBackend* attention) {
    drop_all();
    attention_ = attention;
  }

  const std::vector<int>& sizes() const { return sizes_; }
  int max_size() const { return sizes_.empty() ? 0 : sizes_.back(); }
  size_t width() const { return width_; }
  /// Graphs captured and current.
  int captured() const;

 private:
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t epoch = 0;
  };
  CudaGraphRunner(std::shared_ptr<CudaContext> ctx, CudaAttentionBackend* attention, std::vector<int> sizes,
                  size_t width, int64_t vocab)
      : ctx_(std::move(ctx)), attention_(attention), sizes_(std::move(sizes)), width_(width), vocab_(vocab),
        mirror_(sizes_.empty() ? 0 : sizes_.back(), width) {}
  void drop_all();
  /// Copies `ranges` of the host mirror to the device buffer, after the previous copies have
  /// read the mirror; the whole image when the device copy is not known to match.
  Status upload(const std::vector<ByteRange>& ranges);

  std::shared_ptr<CudaContext> ctx_;
  CudaAttentionBackend* attention_;
  std::vector<int> sizes_;  // ascending
  size_t width_;
  int64_t vocab_;
  std::vector<Graph> graphs_;  // one per size
  GraphInputMirror mirror_;    // what inputs_ holds
  DeviceArray<uint8_t> inputs_;       // ids, positions, the attention image (mirror_.layout())
  DeviceArray<float> out_;            // [max_size][vocab]
  uint8_t* host_ = nullptr;           // pinned: the mirror's bytes, copied from
  cudaEvent_t uploaded_ = nullptr;    // after the last copies from host_
  bool device_matches_ = false;       // inputs_ holds exactly host_
};

}  // namespace troupe::cuda
