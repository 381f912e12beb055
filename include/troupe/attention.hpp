// AttentionBackend: the paged KV cache layout and the attention kernel of a
// platform. The Worker allocates the cache through it; models call forward().
#pragma once

#include <cstdint>
#include <string>

#include "troupe/dtype.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// Shape of the KV cache one model needs (Worker::get_kv_cache_spec).
struct KvCacheSpec {
  int block_size = 16;
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::f32;
  /// Bytes of one block across all layers, K and V.
  int64_t bytes_per_block() const {
    return 2LL * num_layers * block_size * num_kv_heads * head_dim * traits(dtype).block_bytes /
           traits(dtype).block_elems;
  }
};

/// How one layer attends (AttentionBackend::forward). score = (q . k) * scale, then, when
/// logit_softcap > 0, score = logit_softcap * tanh(score / logit_softcap) (Gemma 2); then the
/// softmax. With sliding_window = w > 0, the query at position p sees only the keys at
/// positions (p - w, p] (the last w, its own included: llama.cpp's standard SWA); 0 is no window.
struct AttentionParams {
  float scale = 1.0f;
  int32_t sliding_window = 0;
  float logit_softcap = 0.0f;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  /// Backend name for logs ("cpu_paged", "flash_attn", ...).
  virtual std::string name() const = 0;
  /// Allocate `num_blocks` blocks of `spec`; previous contents are dropped.
  virtual Status allocate(const KvCacheSpec& spec, int64_t num_blocks) = 0;
  /// The spec of the allocated cache (a default KvCacheSpec before allocate()).
  virtual const KvCacheSpec& spec() const = 0;
  /// Blocks of the allocated cache; 0 before allocate().
  virtual int64_t num_blocks() const = 0;
  /// ok when `batch` may run on the allocated cache: one slot per token, every slot and
  /// block id inside the cache, each block table long enough for its seq_len. Workers call
  /// it before each step. The default checks exactly that against spec() and num_blocks();
  /// a backend with further limits overrides it and calls this one too.
  virtual Status check_batch(const ForwardBatch& batch) const;
  /// Store this step's k/v ([num_tokens][num_kv_heads][head_dim]) at batch.slot_mapping,
  /// then attend q ([num_tokens][num_heads][head_dim]) causally over each sequence, as
  /// `params` says (window, soft-capping); out like q.
  virtual void forward(int layer, const float* q, const float* k, const float* v, float* out,
                       int num_heads, const ForwardBatch& batch, const AttentionParams& params) = 0;
  /// Plain causal attention: no window, no soft-capping.
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const ForwardBatch& batch, float scale) {
    forward(layer, q, k, v, out, num_heads, batch, AttentionParams{scale});
  }
};

}  // namespace troupe
