// A load-time quantization method (troupe/quantization.hpp, --quantization NAME) over a
// model source: the f16, bf16 and f32 matrices of an unquantized file become the method's
// format as the model asks for them, vLLM's `--quantization fp8` on a checkpoint. The
// embedding table and the output head keep their type, as vLLM leaves embeddings and
// lm_head unquantized.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "troupe/model.hpp"
#include "troupe/quantization.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// Whether the method converts tensor `t` (a 2-D f16/bf16/f32 matrix, not an embedding
/// table or the output head, whose rows are whole blocks of the format).
bool converts_at_load(const WeightFormat& method, const WeightTensor& t);

/// `base` with `method`'s conversion applied to what converts_at_load selects; the converted
/// tensors live in the returned source (made on first request, kept for its lifetime).
/// invalid_argument when `method` is not a load-time method.
Result<std::unique_ptr<ModelSource>> quantize_at_load(std::unique_ptr<ModelSource> base, const WeightFormat& method);

/// The load-time method `quantization` names (ModelConfig::quantization), or nullptr when
/// it names none (empty, "gguf", or a file's own weight type).
const WeightFormat* load_time_method(std::string_view quantization);

}  // namespace troupe::engine
