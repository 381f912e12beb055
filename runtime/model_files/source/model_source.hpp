// A model as the SDK's ModelSource, whatever its format: a GGUF file, a
// Hugging Face model folder (config.json + model.safetensors), or the dummy
// load format's random weights (a GGUF image built in memory).
#pragma once

#include <memory>
#include <string>

#include "runtime/config/engine_config.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// The ModelSource and what it reads from (kept alive with it).
struct OpenedModel {
  std::shared_ptr<const void> owner;      // the GgufFile (mapped or in memory) or the HfModelFolder
  std::unique_ptr<ModelSource> source;
  bool folder = false;                    // a Hugging Face folder (else GGUF)
  bool dummy = false;                     // random weights built in memory (else read from disk)
};

/// Opens `path`: a folder as a Hugging Face model, anything else as GGUF.
/// Errors name the path and the problem (data_loss for a malformed file).
Result<OpenedModel> open_model(const std::string& path);
/// The model of `config` by its load format: "auto" opens model_path as above;
/// "dummy" builds (or shares, within this process) the random-weights model of
/// model_shape / weight_type / seed. Another format is invalid_argument naming both.
Result<OpenedModel> open_model(const ModelConfig& config);

}  // namespace troupe::engine
