// A model on disk as the SDK's ModelSource, whatever its format: a GGUF file,
// or a Hugging Face model folder (config.json + model.safetensors).
#pragma once

#include <memory>
#include <string>

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// The ModelSource and what it reads from (kept alive with it).
struct OpenedModel {
  std::shared_ptr<const void> owner;      // the mapped file or the folder
  std::unique_ptr<ModelSource> source;
  bool folder = false;                    // a Hugging Face folder (else GGUF)
};

/// Opens `path`: a folder as a Hugging Face model, anything else as GGUF.
/// Errors name the path and the problem (data_loss for a malformed file).
Result<OpenedModel> open_model(const std::string& path);

}  // namespace troupe::engine
