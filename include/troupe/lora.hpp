// LoRA adapters on top of a model's weights (vLLM's LoRA, llama.cpp's GGUF
// adapters). The runtime reads an adapter file into a LoraAdapterSpec (host
// f32 views, one pair of low-rank matrices per base tensor); the worker checks
// it against the loaded model and copies it into device memory (the model
// runner's LoraAdapterSet, troupe/model_runner/); a model applies, to the token rows of each sequence that names
// an adapter (ForwardBatch::lora_ids), y += B (A x) for every base matrix the
// adapter targets, where B already carries the scale alpha / rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

/// What a model reads during forward() (ModelContext::loras): the adapters its worker holds.
class LoraLookup {
 public:
  /// Whether adapter `id` is held.
  virtual bool contains(int64_t id) const = 0;
  /// The update of base tensor `base_name` under adapter `id`, or nullptr (the adapter does
  /// not target it, or is not held).
  virtual const LoraWeights* find(int64_t id, const std::string& base_name) const = 0;

 protected:
  ~LoraLookup() = default;
};

}  // namespace troupe
