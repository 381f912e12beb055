// A Hugging Face decoder folder (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2,
// Gemma 3, and the mixtures of experts Mixtral, Qwen3-MoE, OLMoE) as the ModelSource the
// GGUF decoders read: config.json becomes the GGUF keys llama.cpp's converter would write
// (with <arch> = llama, qwen2, qwen3, phi3, gemma2, gemma3, qwen3moe or olmoe) and the
// safetensors tensors are found under
// their GGUF names (model.layers.N.self_attn.q_proj.weight is
// blk.N.attn_q.weight; each expert model.layers.N.mlp.experts.E.gate_proj.weight is
// blk.N.ffn_gate.E.weight, the form moe_weights.hpp reads besides llama.cpp's merged 3-D
// tensors, so no expert is copied). Matrices are the mapped shard bytes as they are; only
// the 1-D tensors (norms, biases) are copied, as f32, since the models read
// them in f32 (Gemma's norms also get the +1 llama.cpp's converter adds).
//
// Rotary pairs: llama.cpp's converter permutes the Q/K rows of llama/mistral
// so that each head's rotary pairs are adjacent (2i, 2i+1); HF keeps them as
// halves (i, i + d/2). The folder is not permuted: its source says
// "troupe.rope.neox" = 1 and the model rotates halves, which gives the GGUF's
// logits from the HF rows.
//
// Every tensor's shape is checked against config.json when the source is built,
// and errors name the HF tensor and the config key (one line each).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_files/hf/hf_weight_shards.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::hf {

class HfModelFolder;

/// The HF architectures (config.json "architectures"[0]) served as decoders, in order.
const std::vector<std::string>& hf_decoder_architectures();
/// The GGUF architecture of an HF one ("MistralForCausalLM" -> "llama"), or "" when unknown.
std::string gguf_architecture_of(std::string_view hf_architecture);

class HfDecoderSource final : public ModelSource {
 public:
  /// Maps the folder's config and tensors; errors name config.json's key or the tensor.
  static Result<std::unique_ptr<HfDecoderSource>> create(std::shared_ptr<const HfModelFolder> folder);

  std::string architecture() const override { return arch_; }
  const WeightTensor* tensor(std::string_view name) const override;
  std::optional<int64_t> get_int(std::string_view key) const override;
  std::optional<double> get_float(std::string_view key) const override;
  std::optional<std::string> get_string(std::string_view key) const override;
  /// The GGUF-named keys as JSON (for tests and the load log).
  const nlohmann::json& keys() const { return keys_; }

 private:
  HfDecoderSource() = default;
  const nlohmann::json* key(std::string_view k) const;
  std::shared_ptr<const HfModelFolder> folder_;
  std::string arch_;
  nlohmann::json keys_ = nlohmann::json::object();
  std::map<std::string, const WeightTensor*, std::less<>> tensors_;   // GGUF name -> mapped or owned
  std::vector<std::unique_ptr<WeightTensor>> owned_;                  // f32 copies of 1-D tensors
  std::vector<std::vector<float>> owned_data_;
};

}  // namespace troupe::hf
