// Named Llama-family model shapes for the dummy load format (random weights,
// vLLM's --load-format dummy): the hyperparameters of a known model, and the
// weight types a dummy model can be built in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/dtype.hpp"
#include "troupe/status.hpp"

namespace troupe::dummy {

struct ModelShape {
  std::string name;         // "llama-3.2-1b"
  std::string source;       // where the numbers come from
  int64_t n_embd = 0;       // hidden size
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int64_t n_ff = 0;         // feed-forward size
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;        // context_length
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;  // no output.weight: the head reuses token_embd
  int64_t head_dim() const { return n_embd / n_head; }
};

/// Every named shape, in a fixed order.
const std::vector<ModelShape>& model_shapes();
/// The shape called `name`; invalid_argument listing the valid names otherwise.
Result<ModelShape> find_model_shape(std::string_view name);

/// The weight types a dummy model can hold (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k
/// q4_k q5_k q6_k iq4_nl iq4_xs).
const std::vector<DType>& dummy_weight_types();
/// `name` as one of those types; invalid_argument listing them otherwise.
Result<DType> parse_weight_type(std::string_view name);
/// ok when every matrix row of `shape` is a whole number of `type`'s blocks; else
/// invalid_argument naming the rows that are not and the types that fit.
Status check_shape_fits(const ModelShape& shape, DType type);

}  // namespace troupe::dummy
