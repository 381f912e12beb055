// The dummy load format (vLLM's --load-format dummy): a Llama model of a named
// shape with random weights of one type, built as a GGUF image, so that it
// reaches the model code through the same GgufFile / GgufModelSource as a file
// on disk. The same builder writes it to a file (`troupe make-gguf`) that
// troupe and llama.cpp load: same seed, same bytes, same logits.
//
// Contents: general.architecture "llama" with the shape's hyperparameters
// (no rope scaling, no rope_freqs), every matrix in the weight type, norms f32
// and 1, tied shapes without output.weight; the synthetic byte-level BPE
// tokenizer (synthetic_vocab.hpp) with a ChatML template; provenance in
// troupe.dummy.{shape,weight_type,seed}.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/model_files/dummy/model_shapes.hpp"
#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "troupe/config.hpp"
#include "troupe/status.hpp"

namespace troupe::dummy {

inline constexpr const char* kDefaultWeightType = "q8_0";

struct DummyModelSpec {
  ModelShape shape;
  DType weight_type = DType::q8_0;
  uint64_t seed = 0;
};

/// Checks the names (errors list the valid ones) and that the type fits the shape.
/// An empty weight type is kDefaultWeightType.
Result<DummyModelSpec> make_dummy_spec(std::string_view shape, std::string_view weight_type, uint64_t seed);
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
