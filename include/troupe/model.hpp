// What a model definition sees: weights and metadata from a loaded file
// (ModelSource), one step's batch (ForwardBatch), and the platform's compute
// (ModelContext). Models are created by ModelRegistry factories.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/config_view.hpp"
#include "troupe/dtype.hpp"
#include "troupe/status.hpp"

namespace troupe {

class Ops;
class AttentionBackend;
class DeviceAllocator;
class DeviceCommunicator;
class LoraLookup;

/// One weight tensor, memory-mapped from the model file.
/// ne[0] is the fastest-moving dimension (GGUF order): a matrix that maps
/// `in` features to `out` features has ne = {in, out}.
struct WeightTensor {
  std::string name;
  DType type = DType::f32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  const void* data = nullptr;
  uint64_t nbytes = 0;
  /// Bytes from one row (ne[0] elements) to the next; 0: rows are contiguous. A view of a
  /// column slice of a matrix (tensor parallelism) keeps the matrix's full row as its stride.
  int64_t row_stride = 0;
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
};

/// Read-only view of a loaded model file: its metadata and its tensors.
class ModelSource {
 public:
  virtual ~ModelSource() = default;
  /// The architecture string of the file (GGUF general.architecture, e.g. "llama").
  virtual std::string architecture() const = 0;
  /// The tensor with this name, or nullptr.
  virtual const WeightTensor* tensor(std::string_view name) const = 0;
  /// Metadata lookups by full key ("llama.embedding_length"); nullopt when absent or another type.
  virtual std::optional<int64_t> get_int(std::string_view key) const = 0;
  virtual std::optional<double> get_float(std::string_view key) const = 0;
  virtual std::optional<std::string> get_string(std::string_view key) const = 0;
  /// Lets the operating system drop the tensors' resident host pages (sleep level 2); the
  /// tensors stay valid and come back from the file when read. Default: not_supported.
  virtual Status release_pages() const { return not_supported("this model source keeps its weights resident"); }
};

/// Shapes a model reports once built; the engine sizes caches and checks requests with them.
struct ModelInfo {
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t hidden_size = 0;
  uint64_t weight_bytes = 0;  // bytes read per token (all weights touched by one forward)
  /// > 0 when EVERY layer sees only its last sliding_window keys (Mistral 7B v0.1): the KV
  /// cache may free blocks that fall out of the window. 0 when any layer is global (Gemma's
  /// global layers keep every block) or there is no window.
  int32_t sliding_window = 0;
};

/// One step's flattened batch. Sequence i owns tokens
/// [query_start[i], query_start[i+1]) of `token_ids`/`positions`.
struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [num_tokens]
  std::vector<int32_t> positions;     // [num_tokens] absolute position in its sequence
  std::vector<int32_t> query_start;   // [num_seqs + 1]
  std::vector<int32_t> seq_lens;      // [num_seqs] tokens in the KV cache after this step
  std::vector<std::vector<int32_t>> block_tables;  // [num_seqs][blocks]
  std::vector<int64_t> slot_mapping;  // [num_tokens] KV slot = block * block_size + offset
  std::vector<int32_t> logits_indices;// token rows whose logits are wanted, in order
  /// [num_seqs] the LoRA adapter of each sequence (ModelContext::loras; 0: the base model),
  /// or empty when no sequence of the step uses one.
  std::vector<int64_t> lora_ids;
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
};

/// The platform's services handed to a model at construction, and this rank's place in
/// the world: global rank = pp_rank * tp_size + tp_rank (vLLM's layout).
struct ModelContext {
  Ops* ops = nullptr;                    // compute kernels of the active platform
  AttentionBackend* attention = nullptr; // paged attention of the active platform
  /// The device memory of the platform: weights (DeviceWeights) and activations
  /// (DeviceArray) live there, and only ops, attention and communicators touch them.
  DeviceAllocator* allocator = nullptr;
  int64_t max_num_batched_tokens = 2048; // largest ForwardBatch the model will see
  /// Every rank of the world (send/recv between pipeline stages use global ranks);
  /// nullptr for a world of one rank.
  DeviceCommunicator* communicator = nullptr;
  /// The tp_size ranks of this pipeline stage (its rank() is tp_rank); the same object as
  /// `communicator` when pp_size is 1. Unused (may be nullptr) when tp_size is 1.
  DeviceCommunicator* tp_communicator = nullptr;
  int tp_rank = 0, tp_size = 1;
  int pp_rank = 0, pp_size = 1;
  /// The LoRA adapters that ForwardBatch::lora_ids name (troupe/lora.hpp); owned by the
  /// worker, alive as long as the model. nullptr: LoRA is off.
  const LoraLookup* loras = nullptr;
  /// The engine's settings by name (troupe/config_view.hpp), for whatever a model family reads
  /// beyond the fields above: a family that needs a new setting reads it by name, and this
  /// struct (and the SDK) stay as they are. Alive as long as the model; nullptr reads as
  /// "no settings". Phi-3's long-context RoPE, for one, picks its factor set from
  /// "model.max_model_len" (0: the model's own context length), as llama.cpp picks from its
  /// per-sequence context.
  const ConfigView* settings = nullptr;
  /// The integer setting `key`, or `fallback` when there are no settings or no such setting.
  int64_t setting_int(std::string_view key, int64_t fallback = 0) const {
    return settings != nullptr ? settings->get_int(key, fallback) : fallback;
  }
};

/// What this rank's share of a model keeps in the KV cache.
struct KvCacheShape {
  int num_layers = 0;    // layers of this pipeline stage
  int num_kv_heads = 0;  // key-value heads of this tensor-parallel rank
  int head_dim = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  /// Shapes of this model.
  virtual const ModelInfo& info() const = 0;
  /// The KV cache of this rank: its stage's layers and its kv heads. The default is the
  /// whole model (info()), right for a model that is not split over ranks.
  virtual KvCacheShape kv_cache_shape() const {
    return {info().num_layers, info().num_kv_heads, info().head_dim};
  }
  /// Run one step; writes logits for batch.logits_indices to `logits`
  /// ([logits_indices.size(), vocab_size], row-major), device memory of context.allocator
  /// (host memory when it is host_addressable). Only the driver rank (global rank 0)
  /// gets logits; other ranks may pass nullptr. Every rank of the world runs the same batch
  /// in lock step (the collectives are inside).
  virtual Status forward(const ForwardBatch& batch, float* logits) = 0;
  /// Whether forward() applies a LoRA adapter's update of the base tensor `name` (troupe/lora.hpp).
  /// Default: none (the model does not support LoRA).
  virtual bool applies_lora(std::string_view /*name*/) const { return false; }
  /// The pooling runner: the last hidden states of every token of the batch
  /// ([num_tokens][info().hidden_size]) into device memory, like forward's logits.
  /// Default: not_supported.
  virtual Status forward_hidden(const ForwardBatch& /*batch*/, float* /*hidden*/) {
    return not_supported("model " + info().architecture + " cannot return hidden states (pooling)");
  }
};

}  // namespace troupe
