// The weights of a Hugging Face folder: model.safetensors, or the shards that
// model.safetensors.index.json names ({"weight_map": {tensor: shard file}}).
// Every shard is memory-mapped as it is (SafetensorsFile); nothing is copied.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_files/safetensors/safetensors_file.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::hf {

class HfWeightShards {
 public:
  /// Opens `dir`/model.safetensors, else the index and every shard it names. Errors name
  /// the file: not_found for a missing file or shard, data_loss for a broken index (bad
  /// JSON, a shard name leaving the folder, a tensor the index puts in a shard that lacks
  /// it, a tensor in two shards), not_supported for pytorch_model.bin.
  static Result<std::unique_ptr<HfWeightShards>> open(const std::string& dir);

  /// The usable tensor of that name in any shard, or nullptr.
  const WeightTensor* tensor(std::string_view name) const;
  /// The header entry of that name (any dtype), or nullptr.
  const safetensors::TensorEntry* entry(std::string_view name) const;
  /// Every usable tensor of every shard, shard by shard.
  std::vector<const WeightTensor*> tensors() const;
  const std::vector<std::shared_ptr<const safetensors::SafetensorsFile>>& files() const { return files_; }
  /// Bytes mapped (all shards' file sizes).
  uint64_t mapped_bytes() const;

 private:
  HfWeightShards() = default;
  std::vector<std::shared_ptr<const safetensors::SafetensorsFile>> files_;
  std::map<std::string, const safetensors::SafetensorsFile*, std::less<>> by_name_;
};

}  // namespace troupe::hf
