// The dummy load format (vLLM's --load-format dummy): a model of a named shape
// (llama, qwen2, qwen3, phi3, gemma2, gemma3, gpt2: model_shapes.hpp) with random
// weights of one type, built as a GGUF image, so that it reaches the model code
// through the same GgufFile / GgufModelSource as a file on disk. The same builder
// writes it to a file (`troupe make-gguf`) that troupe and llama.cpp load: same
// seed, same bytes, same logits.
//
// Contents: the shape's general.architecture with its hyperparameters under that
// prefix, every tensor and key a real file of the family has in llama.cpp's
// layout (Llama 3.x's rope_freqs, qwen2's biases, qwen3's q/k norms, phi3's fused
// attn_qkv and ffn_up, Gemma's post-norms, soft-capping and window keys, a Mistral
// window; GPT-2's learned positions, layer-norm biases and biased projections), every
// matrix in the weight type, norms f32 and 1, biases f32 random, tied
// shapes without output.weight; the synthetic byte-level BPE tokenizer
// (synthetic_vocab.hpp) with the family's special tokens and chat template; provenance
// in troupe.dummy.{shape,weight_type,seed}.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/model_files/dummy/model_shapes.hpp"
#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::dummy {

inline constexpr const char* kDefaultWeightType = "q8_0";

struct DummyModelSpec {
  ModelShape shape;
  DType weight_type = DType::q8_0;
  uint64_t seed = 0;
};

/// Checks the names (errors list the valid ones) and that the type fits the shape.
/// An empty weight type is kDefaultWeightType. layers > 0 keeps only the first `layers`
/// blocks (small test files; at most the shape's count).
Result<DummyModelSpec> make_dummy_spec(std::string_view shape, std::string_view weight_type, uint64_t seed,
                                       int layers = 0);
/// The spec of config.model_shape, .weight_type and .seed.
Result<DummyModelSpec> dummy_spec(const ModelConfig& config);
/// "llama-3.2-1b-q8_0-dummy": the served model name.
std::string dummy_model_name(const DummyModelSpec& spec);

/// The model as a GGUF builder: metadata, tokenizer and every tensor with its random fill.
Result<gguf::GgufBuilder> dummy_gguf(const DummyModelSpec& spec);
/// The model in memory (built on every core the first time), shared by every caller in
/// this process while one of them holds it.
Result<std::shared_ptr<const gguf::GgufFile>> open_dummy_model(const DummyModelSpec& spec);

}  // namespace troupe::dummy
