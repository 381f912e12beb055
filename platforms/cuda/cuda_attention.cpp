#include "platforms/cuda/cuda_attention.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "troupe/log.hpp"

namespace troupe::cuda {

namespace kc = troupe::kernels::cuda;

Result<DType> cuda_kv_cache_dtype(const std::string& d) {
  if (d == "auto" || d == "fp16" || d == "float16" || d == "f16" || d == "half") return DType::f16;
  if (d == "bf16" || d == "bfloat16") return DType::bf16;
  if (d == "fp32" || d == "float32" || d == "f32" || d == "float") return DType::f32;
  return invalid_argument("KV cache dtype '" + d +
                          "' is not supported by platform cuda (choose auto, fp16, bfloat16 or fp32)");
}

CudaAttentionBackend::~CudaAttentionBackend() { release(); }

void CudaAttentionBackend::release() {
  if (storage_ != nullptr) {
    (void)ctx_->make_current();
    (void)cudaFree(storage_);
    ctx_->note_memory_freed(storage_serial_);
  }
  storage_ = nullptr;
  spec_ = KvCacheSpec();
  num_blocks_ = 0;
  layer_bytes_ = 0;
}

Status CudaAttentionBackend::allocate(const KvCacheSpec& spec, int64_t num_blocks) {
  if (!kc::supports_cache_type(spec.dtype))
    return not_supported("the cuda_paged attention backend stores the KV cache in f16, bf16 or f32, not " +
                         std::string(to_string(spec.dtype)));
  if (spec.block_size <= 0 || spec.num_layers <= 0 || spec.num_kv_heads <= 0 || spec.head_dim <= 0)
    return invalid_argument("invalid KV cache spec (block size, layers, kv heads and head dim must be positive)");
  if (spec.head_dim > kc::kMaxHeadDim)
    return not_supported("the cuda_paged attention backend takes head dims up to " +
                         std::to_string(kc::kMaxHeadDim) + ", not " + std::to_string(spec.head_dim));
  if (num_blocks <= 0) return invalid_argument("the KV cache needs at least one block");
  release();
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  const int64_t elem = traits(spec.dtype).block_bytes / traits(spec.dtype).block_elems;
  const int64_t layer_bytes = num_blocks * spec.block_size * spec.num_kv_heads * spec.head_dim * elem;
  const int64_t total = layer_bytes * 2 * spec.num_layers;
  const cudaError_t err = cudaMalloc(&storage_, static_cast<size_t>(total));
  if (err != cudaSuccess) {
    storage_ = nullptr;
    (void)cudaGetLastError();
    return resource_exhausted(ctx_->name() + ": cannot allocate a KV cache of " + std::to_string(num_blocks) +
                              " blocks (" + std::to_string(total >> 20) + " MiB): " + cudaGetErrorString(err));
  }
  spec_ = spec;
  num_blocks_ = num_blocks;
  layer_bytes_ = layer_bytes;
  storage_serial_ = ctx_->allocation_serial();
  TROUPE_LOG_INFO("cuda_paged KV cache on {}: {} blocks of {} tokens, {} ({:.1f} MiB)", ctx_->name(), num_blocks,
                  spec.block_size, to_string(spec.dtype), static_cast<double>(total) / (1 << 20));
  return {};
}

Status check_cuda_batch_shape(const ForwardBatch& batch) {
  if (batch.num_tokens() > 0 && batch.query_start.size() != batch.seq_lens.size() + 1)
    return invalid_argument("forward batch: query_start needs num_seqs + 1 entries");
  return {};
}

Status CudaAttentionBackend::check_batch(const ForwardBatch& batch) const {
  TROUPE_RETURN_IF_ERROR(AttentionBackend::check_batch(batch));
  return check_cuda_batch_shape(batch);
}

namespace {

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

}  // namespace

AttentionInputsLayout attention_inputs_layout(int64_t num_tokens, int num_seqs, size_t width) {
  AttentionInputsLayout l;
  l.width = width;
  l.query_start = align8(static_cast<size_t>(num_tokens) * sizeof(int64_t));
  l.seq_lens = align8(l.query_start + (static_cast<size_t>(num_seqs) + 1) * sizeof(int32_t));
  l.block_tables = align8(l.seq_lens + static_cast<size_t>(num_seqs) * sizeof(int32_t));
  l.bytes = l.block_tables + static_cast<size_t>(num_seqs) * width * sizeof(int32_t);
  return l;
}

AttentionInputsLayout pack_attention_inputs(const ForwardBatch& b, size_t width, std::vector<uint8_t>& out) {
  const int S = b.num_seqs();
  const AttentionInputsLayout l = attention_inputs_layout(b.num_tokens(), S, width);
  out.assign(l.bytes, 0);
  std::memcpy(out.data(), b.slot_mapping.data(), b.slot_mapping.size() * sizeof(int64_t));
  std::memcpy(out.data() + l.query_start, b.query_start.data(), b.query_start.size() * sizeof(int32_t));
  std::memcpy(out.data() + l.seq_lens, b.seq_lens.data(), b.seq_lens.size() * sizeof(int32_t));
  auto* tables = reinterpret_cast<int32_t*>(out.data() + l.block_tables);
  for (int s = 0; s < S; ++s) {
    const auto& t = b.block_tables[static_cast<size_t>(s)];
    int32_t* row = tables + static_cast<size_t>(s) * width;
    const size_t n = std::min(t.size(), width);
    std::copy(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n), row);
    std::fill(row + n, row + width, -1);
  }
  return l;
}

bool CudaAttentionBackend::implements(std::string_view name) const {
  return name == "scale" || name == "sliding_window" || name == "logit_softcap" || name == "sinks";
}

Status CudaAttentionBackend::run(int layer, const float* q, const float* k, const float* v, float* out,
                                 int num_heads, const ForwardBatch& b, const AttentionParams& params) {
  if (storage_ == nullptr) return unavailable("the cuda_paged KV cache is not allocated (initialize_cache first)");
  if (layer < 0 || layer >= spec_.num_layers)
    return out_of_range("attention layer " + std::to_string(layer) + " is outside the cache's " +
                        std::to_string(spec_.num_layers) + " layers");
  const int S = b.num_seqs();
  const int64_t T = b.num_tokens();
  if (static_cast<int64_t>(b.slot_mapping.size()) != T || static_cast<int>(b.query_start.size()) != S + 1 ||
      static_cast<int>(b.block_tables.size()) != S)
    return invalid_argument("forward batch: slot_mapping, query_start or block_tables has the wrong length");
  size_t max_blocks = 1;
  for (const auto& t : b.block_tables) max_blocks = std::max(max_blocks, t.size());
  AttentionInputsLayout l;
  const uint8_t* dev = nullptr;
  if (graph_image_ != nullptr) {
    // Captured into a graph: the runner uploads each replay's arrays to the image.
    if (max_blocks > graph_width_ || S > graph_rows_ || T > graph_rows_)
      return invalid_argument("a batch of " + std::to_string(S) + " sequences with block tables of up to " +
                              std::to_string(max_blocks) + " blocks does not fit the CUDA graph image (" +
                              std::to_string(graph_rows_) + " rows, " + std::to_string(graph_width_) + " wide)");
    l = attention_inputs_layout(graph_rows_, graph_rows_, graph_width_);
    dev = static_cast<const uint8_t*>(graph_image_);
  } else {
    // One packed host image of the step's arrays, staged once per step: the same bytes for
    // the next layer reuse the device copy.
    l = pack_attention_inputs(b, max_blocks, packed_);
    auto staged = ctx_->stage(packed_.data(), static_cast<int64_t>(packed_.size()));
    if (!staged.ok()) return staged.status();
    dev = static_cast<const uint8_t*>(*staged);
  }

  auto* base = static_cast<uint8_t*>(storage_);
  void* k_cache = base + (2 * int64_t{layer}) * layer_bytes_;
  void* v_cache = base + (2 * int64_t{layer} + 1) * layer_bytes_;
  const int64_t kv_dim = int64_t{spec_.num_kv_heads} * spec_.head_dim;
  TROUPE_RETURN_IF_ERROR(kc::paged_kv_store(k_cache, v_cache, spec_.dtype, k, v, reinterpret_cast<const int64_t*>(dev),
                                            T, kv_dim, num_blocks_ * spec_.block_size, ctx_->stream()));
  kc::PagedAttentionParams p;
  p.q = q;
  p.out = out;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.cache_type = spec_.dtype;
  p.query_start = reinterpret_cast<const int32_t*>(dev + l.query_start);
  p.seq_lens = reinterpret_cast<const int32_t*>(dev + l.seq_lens);
  p.block_tables = reinterpret_cast<const int32_t*>(dev + l.block_tables);
  p.max_blocks_per_seq = static_cast<int>(l.width);
  p.num_blocks = num_blocks_;
  p.num_seqs = S;
  p.num_tokens = T;
  p.num_heads = num_heads;
  p.num_kv_heads = spec_.num_kv_heads;
  p.head_dim = spec_.head_dim;
  p.block_size = spec_.block_size;
  p.scale = static_cast<float>(params.number("scale", 1.0));
  p.window = static_cast<int32_t>(params.number("sliding_window"));
  p.softcap = static_cast<float>(params.number("logit_softcap"));
  if (const std::span<const float> sinks = params.array("sinks"); !sinks.empty()) {
    if (static_cast<int>(sinks.size()) != num_heads)
      return invalid_argument("attention sinks: " + std::to_string(sinks.size()) + " values for " +
                              std::to_string(num_heads) + " heads");
    auto staged = ctx_->stage(sinks.data(), static_cast<int64_t>(sinks.size_bytes()));
    if (!staged.ok()) return staged.status();
    p.sinks = static_cast<const float*>(*staged);
  }
  return kc::paged_attention(p, ctx_->stream());
}

void CudaAttentionBackend::forward(int layer, const float* q, const float* k, const float* v, float* out,
                                   int num_heads, const ForwardBatch& batch, const AttentionParams& params) {
  ctx_->record(run(layer, q, k, v, out, num_heads, batch, params));
}

}  // namespace troupe::cuda
