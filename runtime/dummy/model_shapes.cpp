#include "runtime/dummy/model_shapes.hpp"

namespace troupe::dummy {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

}  // namespace

const std::vector<ModelShape>& model_shapes() {
  // name, source, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, rope_theta, rms_eps, tied
  static const std::vector<ModelShape> kShapes = {
      {"llama-3.2-1b", "Llama-3.2-1B's config.json (its llama3 rope scaling is not modelled)", 2048, 16, 32, 8, 8192,
       128256, 131072, 500000.0f, 1e-5f, true},
      {"llama-3.2-3b", "Llama-3.2-3B's config.json (its llama3 rope scaling is not modelled)", 3072, 28, 24, 8, 8192,
       128256, 131072, 500000.0f, 1e-5f, true},
      {"llama-3.1-8b", "Llama-3.1-8B's config.json (its llama3 rope scaling is not modelled)", 4096, 32, 32, 8, 14336,
       128256, 131072, 500000.0f, 1e-5f, false},
      {"smollm2-135m", "the metadata of SmolLM2-135M-Instruct.Q4_1.gguf", 576, 30, 9, 3, 1536, 49152, 8192, 100000.0f,
       1e-5f, true},
      {"stories260k", "the metadata of tests/data/stories260K.gguf", 64, 5, 8, 4, 172, 512, 2048, 10000.0f, 1e-5f,
       false},
      {"tiny", "troupe's own test shape: every row a whole number of 256-element blocks", 256, 2, 4, 2, 512, 512, 2048,
       10000.0f, 1e-5f, true},
  };
  return kShapes;
}

Result<ModelShape> find_model_shape(std::string_view name) {
  std::vector<std::string> names;
  for (const ModelShape& s : model_shapes()) {
    if (s.name == name) return s;
    names.push_back(s.name);
  }
  if (name.empty()) return invalid_argument("the dummy load format needs a model shape (one of: " + joined(names) + ")");
  return invalid_argument("unknown model shape '" + std::string(name) + "' (valid: " + joined(names) + ")");
}

const std::vector<DType>& dummy_weight_types() {
  static const std::vector<DType> kTypes = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                                            DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_k, DType::q3_k,
                                            DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_nl, DType::iq4_xs};
  return kTypes;
}

Result<DType> parse_weight_type(std::string_view name) {
  std::vector<std::string> names;
  for (DType t : dummy_weight_types()) {
    if (to_string(t) == name) return t;
    names.emplace_back(to_string(t));
  }
  return invalid_argument("unknown weight type '" + std::string(name) + "' (valid: " + joined(names) + ")");
}

Status check_shape_fits(const ModelShape& shape, DType type) {
  const int64_t block = traits(type).block_elems;
  const std::pair<int64_t, const char*> rows[] = {{shape.n_embd, "hidden size"}, {shape.n_ff, "feed-forward size"}};
  std::vector<std::string> bad;
  for (const auto& [n, what] : rows)
    if (n % block != 0) bad.push_back(std::to_string(n) + " (" + what + ")");
  if (bad.empty()) return {};
  std::vector<std::string> fit;
  for (DType t : dummy_weight_types())
    if (shape.n_embd % traits(t).block_elems == 0 && shape.n_ff % traits(t).block_elems == 0)
      fit.emplace_back(to_string(t));
  return invalid_argument("weight type " + std::string(to_string(type)) + " stores rows in blocks of " +
                          std::to_string(block) + " elements; shape " + shape.name + " has rows of " + joined(bad) +
                          "; types that fit it: " + joined(fit));
}

}  // namespace troupe::dummy
