// AttentionBackend: the paged KV cache layout and the attention kernel of a
// platform. The Worker allocates the cache through it; models call forward().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

/// How one layer attends (AttentionBackend::forward), as named values: a new attention
/// feature of a model family is a new name, not a new field, so it changes no SDK header
/// and rebuilds no plugin (as ConfigView carries the engine's settings). Names today:
///   "scale"          score = (q . k) * scale (default 1)
///   "sliding_window" w > 0: the query at position p sees only the keys at positions
///                    (p - w, p], its own included (llama.cpp's standard SWA); 0: no window
///   "logit_softcap"  c > 0: score = c * tanh(score / c) before the softmax (Gemma 2); 0: none
/// A value is a number, or an array of floats in host memory that outlives the call (a
/// per-head parameter). A backend says which names it implements (AttentionBackend::
/// implements); a model checks its parameters once, at load time (check_params), so a
/// backend that lacks one is refused with a message naming it, never silently ignored.
/// The layout of this class never changes.
class AttentionParams {
 public:
  AttentionParams() = default;
  explicit AttentionParams(float scale) { set("scale", scale); }

  /// Sets (or replaces) a number.
  AttentionParams& set(std::string_view name, double value);
  /// Sets (or replaces) an array of `count` floats (host memory the caller keeps alive).
  AttentionParams& set_array(std::string_view name, const float* values, int64_t count);
  /// The number called `name`, or `fallback` when it is not set (or is an array).
  double number(std::string_view name, double fallback = 0.0) const;
  /// The array called `name`; empty when it is not set (or is a number).
  std::span<const float> array(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  /// The names set, in the order they were first set.
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::string name;
    double number = 0.0;
    const float* values = nullptr;  // an array's floats; nullptr for a number
    int64_t count = 0;
  };
  const Entry* find(std::string_view name) const;
  Entry& slot(std::string_view name);
  std::vector<Entry> entries_;
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
  /// Whether forward() honours the attention parameter `name` (AttentionParams lists the
  /// names). The default knows "scale" alone: a backend names every parameter it implements.
  virtual bool implements(std::string_view name) const;
  /// ok when this backend implements every parameter `params` sets; otherwise not_supported
  /// naming the parameter and the backend. Models call it for each layer's parameters when
  /// they are built.
  Status check_params(const AttentionParams& params) const;
  /// Store this step's k/v ([num_tokens][num_kv_heads][head_dim]) at batch.slot_mapping,
  /// then attend q ([num_tokens][num_heads][head_dim]) causally over each sequence, as
  /// `params` says (window, soft-capping); out like q.
  virtual void forward(int layer, const float* q, const float* k, const float* v, float* out,
                       int num_heads, const ForwardBatch& batch, const AttentionParams& params) = 0;
  /// Plain causal attention: no window, no soft-capping.
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const ForwardBatch& batch, float scale) {
    forward(layer, q, k, v, out, num_heads, batch, AttentionParams(scale));
  }
};

}  // namespace troupe
