// LoRA adapters on top of a model's weights (vLLM's LoRA, llama.cpp's GGUF
// adapters). The runtime reads an adapter file into a LoraAdapterSpec (host
// f32 views, one pair of low-rank matrices per base tensor); the worker checks
// it against the loaded model and copies it into device memory as a
// LoraAdapter; a model applies, to the token rows of each sequence that names
// an adapter (ForwardBatch::lora_ids), y += B (A x) for every base matrix the
// adapter targets, where B already carries the scale alpha / rank.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// One base matrix's low-rank update, in host memory (f32, contiguous).
/// a: ne = {in, rank} (maps in -> rank); b: ne = {rank, out} (maps rank -> out); the base
/// matrix has ne = {in, out}. llama.cpp's "<base>.lora_a" / "<base>.lora_b" layout.
struct LoraTargetSpec {
  std::string base_name;  // the base tensor ("blk.0.attn_q.weight")
  WeightTensor a;
  WeightTensor b;
};

/// An adapter file as read by the runtime. scale of a target = alpha / rank (1 when alpha is 0).
struct LoraAdapterSpec {
  std::string path;   // for messages
  float alpha = 0;    // adapter.lora.alpha
  std::vector<LoraTargetSpec> targets;
};

/// One target in device memory: f32, B scaled.
struct LoraWeights {
  WeightTensor a;  // {in, rank}
  WeightTensor b;  // {rank, out}, times alpha / rank
  int64_t rank = 0;
};

/// The adapters a worker holds, by id (> 0); what a model reads during forward().
class LoraAdapterSet {
 public:
  /// Checks `spec` against the base model (every target names a base tensor the model
  /// applies LoRA to, with matching shapes; rank <= max_rank), then places it in
  /// `allocator`'s memory. invalid_argument naming the file, the tensor and the problem;
  /// invalid_argument for a used id as well.
  Status add(int64_t id, const LoraAdapterSpec& spec, const ModelSource& base, const Model& model,
             DeviceAllocator& allocator, int64_t max_rank);
  /// not_found when `id` is not held.
  Status remove(int64_t id);
  Status pin(int64_t id);
  bool contains(int64_t id) const { return adapters_.contains(id); }
  bool pinned(int64_t id) const;
  std::vector<int64_t> ids() const;
  /// The update of base tensor `base_name` under adapter `id`, or nullptr (the adapter does
  /// not target it, or is not held).
  const LoraWeights* find(int64_t id, const std::string& base_name) const;
  int64_t device_bytes() const;

 private:
  struct Adapter {
    std::unordered_map<std::string, LoraWeights> targets;
    std::vector<std::unique_ptr<DeviceBuffer>> buffers;
    int64_t bytes = 0;
    bool pinned = false;
  };
  std::map<int64_t, Adapter> adapters_;
};

}  // namespace troupe
