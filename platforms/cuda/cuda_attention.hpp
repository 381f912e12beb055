// The cuda attention backend: a paged KV cache in device memory with the CPU
// backend's layout (per layer, K and V of [num_blocks * block_size][num_kv_heads]
// [head_dim]), f16 by default, f32 or bf16 on request, and the paged attention
// kernel of kernels/cuda for prefill chunks and decodes alike. The step's host
// arrays (slot mapping, query starts, sequence lengths, block tables) are
// staged into device memory once per step (the context reuses the staging for
// every layer of the same batch). While a decode graph is captured the arrays
// come from a fixed device image instead (set_graph_image), of a fixed width of
// block table; the graph runner uploads what changed of each step's image there
// before a replay.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "platforms/cuda/cuda_context.hpp"
#include "troupe/attention.hpp"

namespace troupe::cuda {

/// Where the arrays of a step sit in its packed image (byte offsets, each 8-aligned): slot
/// mapping (int64), query starts, sequence lengths (int32), then block tables of `width`
/// entries per sequence (int32, -1 past a sequence's table).
struct AttentionInputsLayout {
  size_t query_start = 0, seq_lens = 0, block_tables = 0, bytes = 0;
  size_t width = 0;
};
AttentionInputsLayout attention_inputs_layout(int64_t num_tokens, int num_seqs, size_t width);
/// Packs `b` into `out` with tables `width` wide (each table must fit).
AttentionInputsLayout pack_attention_inputs(const ForwardBatch& b, size_t width, std::vector<uint8_t>& out);

/// What cuda_paged checks beyond the SDK's AttentionBackend::check_batch (host only).
Status check_cuda_batch_shape(const ForwardBatch& batch);

/// The cache dtype a config's cache_dtype names: "auto" (f16), "fp16"/"float16"/"f16"/"half",
/// "bf16"/"bfloat16", "fp32"/"float32"/"f32"/"float"; anything else is invalid_argument.
Result<DType> cuda_kv_cache_dtype(const std::string& cache_dtype);

class CudaAttentionBackend final : public AttentionBackend {
 public:
  explicit CudaAttentionBackend(std::shared_ptr<CudaContext> ctx) : ctx_(std::move(ctx)) {}
  ~CudaAttentionBackend() override;
  std::string name() const override { return "cuda_paged"; }
  /// cudaMalloc of the whole cache (resource_exhausted when the device is full).
  Status allocate(const KvCacheSpec& spec, int64_t num_blocks) override;
  const KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return num_blocks_; }
  /// Also: head_dim at most the kernel's 256.
  Status check_batch(const ForwardBatch& batch) const override;
  /// Failures are recorded in the context (the worker fails the step with them).
  /// scale, sliding_window and logit_softcap.
  bool implements(std::string_view name) const override;
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const ForwardBatch& batch, const AttentionParams& params) override;
  using AttentionBackend::forward;
  /// Drops the cache (its device memory is freed); allocate() makes a new one.
  void release();
  /// While a graph is captured: read the step's arrays from `image` (device memory, the
  /// layout of attention_inputs_layout(rows, rows, width): every graph size shares one image
  /// laid out for the largest, and a batch of S sequences reads the first S of each array)
  /// instead of staging them. nullptr goes back to staging.
  void set_graph_image(const void* image, int rows, size_t width) {
    graph_image_ = image;
    graph_rows_ = rows;
    graph_width_ = width;
  }

 private:
  Status run(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
             const ForwardBatch& batch, const AttentionParams& params);

  std::shared_ptr<CudaContext> ctx_;
  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  void* storage_ = nullptr;
  uint64_t storage_serial_ = 0;        // CudaContext::allocation_serial of storage_
  int64_t layer_bytes_ = 0;            // one layer's K (or V)
  std::vector<uint8_t> packed_;        // the step's host arrays, packed for one staging copy
  const void* graph_image_ = nullptr;  // set while a decode graph is captured
  int graph_rows_ = 0;
  size_t graph_width_ = 0;
};

}  // namespace troupe::cuda
