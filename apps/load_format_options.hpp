// The flags `troupe serve`, `troupe generate` and `troupe make-gguf` share for
// the dummy load format (vLLM's --load-format dummy): --load-format,
// --model-shape and --weight-type; the weights' seed is each command's --seed.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

struct LoadFormatOptions {
  std::string load_format = "auto";
  std::string model_shape;
  std::string weight_type;
  bool dummy() const { return load_format == "dummy"; }
};

inline std::string model_shape_names() {
  std::string s;
  for (const auto& shape : dummy::model_shapes()) s += (s.empty() ? "" : ", ") + shape.name;
  return s;
}

inline std::string weight_type_names() {
  std::string s;
  for (DType t : dummy::dummy_weight_types()) s += (s.empty() ? "" : ", ") + std::string(to_string(t));
  return s;
}

inline void add_model_shape_options(CLI::App& sub, LoadFormatOptions* o) {
  sub.add_option("--model-shape", o->model_shape, "Shape of the random-weights model: " + model_shape_names());
  sub.add_option("--weight-type", o->weight_type,
                 "Type of its matrices: " + weight_type_names() + " (default " + dummy::kDefaultWeightType + ")");
}

inline void add_load_format_options(CLI::App& sub, LoadFormatOptions* o) {
  sub.add_option("--load-format", o->load_format,
                 "auto: read MODEL (GGUF file or Hugging Face folder); dummy: random weights of --model-shape, "
                 "no file (weights from --seed)");
  add_model_shape_options(sub, o);
}

/// Checks the combination and fills `config`: the dummy format takes a shape and no
/// model path; the shape flags need the dummy format.
inline Status apply_load_format(const LoadFormatOptions& o, const std::string& model_arg, ModelConfig* config) {
  if (o.load_format != "auto" && o.load_format != "dummy")
    return invalid_argument("unknown --load-format '" + o.load_format + "' (valid: auto, dummy)");
  if (!o.dummy() && (!o.model_shape.empty() || !o.weight_type.empty()))
    return invalid_argument("--model-shape and --weight-type need --load-format dummy");
  if (o.dummy()) {
    if (!model_arg.empty())
      return invalid_argument("--load-format dummy builds the model from --model-shape; give no MODEL (got " +
                              model_arg + ")");
    if (o.model_shape.empty())
      return invalid_argument("--load-format dummy needs --model-shape (one of: " + model_shape_names() + ")");
  }
  config->load_format = o.load_format;
  config->model_shape = o.model_shape;
  config->weight_type = o.weight_type;
  return {};
}

}  // namespace troupe::apps
