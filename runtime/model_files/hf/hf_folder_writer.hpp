// Writes a Hugging Face decoder folder holding the same weights as a GGUF model
// (a test tool: `troupe make-gguf SHAPE --hf-folder DIR`): config.json from the
// shape, model.safetensors (or N shards and model.safetensors.index.json),
// generation_config.json, and tokenizer.json / tokenizer_config.json from the
// GGUF's tokenizer (tokenizer_json_writer). Tensors get their HF names and layout, undoing what
// llama.cpp's converter does: llama's Q/K rows back from rotary pairs to halves,
// Gemma's norms minus 1, phi3's fused qkv / gate_up kept fused. Matrices keep
// their type (f32, f16 or bf16; quantized types are refused), 1-D tensors are
// written f32, so the folder and the GGUF hold the same numbers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/model_files/dummy/model_shapes.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "troupe/status.hpp"

namespace troupe::hf {

struct HfFolderOptions {
  int shards = 1;                      // >1: model-0000i-of-0000N.safetensors + the index
  std::string architecture;            // config.json architectures[0]; "" = the shape's (MistralForCausalLM: a llama shape)
  nlohmann::json generation_config = nlohmann::json::object();  // merged into generation_config.json
  bool unpermute_qk = true;            // false: llama's Q/K rows left as the GGUF holds them (a wrong
                                       // folder, the tests' control)
};

/// The HF architecture a shape's GGUF architecture is written as ("llama" -> LlamaForCausalLM).
std::string hf_architecture_for(const dummy::ModelShape& shape);

/// Writes `dir` (created if absent; existing files of these names are replaced) from `model`,
/// a GGUF of `shape` (as dummy_gguf builds it).
Status write_hf_folder(const dummy::ModelShape& shape, const gguf::GgufFile& model, const std::string& dir,
                       const HfFolderOptions& options = {});

}  // namespace troupe::hf
