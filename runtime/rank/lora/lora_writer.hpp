// Writes test material for LoRA (`troupe make-lora`): a random adapter for a
// base GGUF model in llama.cpp's adapter layout, and the base model with an
// adapter merged into its weights (W + alpha/rank * B A) as a GGUF file, so the
// engine's adapter path can be checked against a plain model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::lora {

struct RandomLoraOptions {
  int64_t rank = 8;
  float alpha = 16;
  uint64_t seed = 1;
  float stddev = 0.05f;  // of every element of A and B (normal)
  /// Tensor kinds of every layer to adapt ("attn_q", ..., "ffn_down"); empty: all seven.
  std::vector<std::string> kinds;
  /// Set (make-lora --merged-output): a targeted matrix that write_merged_model cannot merge
  /// (not 2-D f32) is refused before anything is written.
  bool mergeable = false;
};

/// Writes to `out_path` a random f32 adapter for the llama-family GGUF `base_path`.
/// Returns the number of adapted tensors.
Result<int64_t> write_random_lora(const std::string& base_path, const RandomLoraOptions& options,
                                  const std::string& out_path);

/// Writes `base_path` with `adapter_path` merged in (every f32 base matrix the adapter
/// targets becomes W + alpha/rank * B A) to `out_path`; metadata and other tensors as they are.
Status write_merged_model(const std::string& base_path, const std::string& adapter_path, const std::string& out_path);

}  // namespace troupe::lora
