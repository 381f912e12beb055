// LoraAdapterSet: the LoRA adapters a ModelRunnerWorker holds in its platform's
// memory, by id; models read them through ModelContext::loras (troupe/lora.hpp's
// LoraLookup). Part of the model runner library, not of the SDK's contract.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/device_memory.hpp"
#include "troupe/lora.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// The adapters a worker holds, by id (> 0); what a model reads during forward().
class LoraAdapterSet final : public LoraLookup {
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
  bool contains(int64_t id) const override { return adapters_.contains(id); }
  bool pinned(int64_t id) const;
  std::vector<int64_t> ids() const;
  /// The update of base tensor `base_name` under adapter `id`, or nullptr (the adapter does
  /// not target it, or is not held).
  const LoraWeights* find(int64_t id, const std::string& base_name) const override;
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
