// Reads a LoRA adapter as llama.cpp's convert_lora_to_gguf.py writes it: a GGUF
// file with general.type "adapter", adapter.type "lora", adapter.lora.alpha,
// and for each adapted base tensor X the pair "X.lora_a" (ne = {in, rank}) and
// "X.lora_b" (ne = {rank, out}), f32, f16 or bf16. The result holds f32 copies
// and the SDK's LoraAdapterSpec viewing them (troupe/lora.hpp); whether it fits
// the base model is the worker's check (LoraAdapterSet::add).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "troupe/lora.hpp"
#include "troupe/status.hpp"

namespace troupe::lora {

struct LoraFile {
  std::string architecture;              // general.architecture of the adapter
  LoraAdapterSpec spec;                  // views into `data`
  std::vector<std::vector<float>> data;  // f32 copies of the tensors
};

/// Opens and checks `path`: metadata, pairing of lora_a/lora_b, types. Errors name the
/// path and the problem (not_found for a missing file, invalid_argument otherwise).
Result<std::unique_ptr<LoraFile>> read_lora_file(const std::string& path);

}  // namespace troupe::lora
