// The first part of starting an engine: what the engine's own process reads
// from the model (tokenizer, chat template, limits, runner), before any worker
// loads weights. The model is a GGUF file or a Hugging Face folder.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/text/chat/chat_prompt.hpp"
#include "runtime/model_files/source/model_source.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/platform.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

struct ModelArtifacts {
  OpenedModel model;                                // metadata and tensors (the workers open their own)
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  chat::ChatPromptSource chat_prompt;               // the model's template, --chat-template's, or a built-in fallback
  std::vector<std::string> weight_types;            // distinct types of the matrices (2-D and up) as loaded, sorted
  int converted_at_load = 0;                        // matrices the load-time method (--quantization) converts
  bool encoder = false;                             // an encoder (BERT): pooling only
};

/// Opens config.model.model_path and reads the tokenizer and chat template:
/// config.extra["chat_template"] (--chat-template: a built-in name, a file or a Jinja
/// string; a template that does not compile is invalid_argument), else the GGUF's
/// tokenizer.chat_template or the folder's chat_template.jinja / tokenizer_config.json,
/// else a built-in family recognized in the file's template.
/// Fills config.model.architecture, .served_model_name (when empty: a GGUF file's
/// name, a folder's path as given, as vLLM), .generation_defaults (by
/// .generation_config: a folder's generation_config.json), .quantization (the type holding most weight bytes, when
/// empty or "gguf"; a load-time method's name is checked against the registry, and the matrices it
/// converts count as its format in .weight_types), .runner ("auto" becomes "pooling" for encoders, else "generate";
/// an explicit runner the model cannot run is invalid_argument) and, for the
/// pooling runner, .pooling_type / .pooling_normalize from the model's pooling
/// config (sentence-transformers), else last-token and normalized as vLLM
/// does for decoders; a folder's max_seq_length caps .max_model_len.
/// Errors name the file and the problem (data_loss for a malformed file).
Result<ModelArtifacts> load_model_artifacts(EngineConfig& config);

/// The tokenizer of an opened model (GGUF metadata, or the folder's tokenizer.json).
Result<std::shared_ptr<const tokenizer::Tokenizer>> load_tokenizer(const OpenedModel& model);

/// vLLM's checks of tensor and pipeline parallel sizes against the model's
/// heads and layers, before any rank starts: e.g. "Total number of attention
/// heads (9) must be divisible by tensor parallel size (2)." (invalid_argument).
Status verify_parallel_config(const EngineConfig& config, const ModelArtifacts& artifacts);

/// ok when `platform` can compute every weight type of the model; else the
/// platform's not_supported error for the first type it cannot.
Status verify_weight_types(const Platform& platform, const ModelArtifacts& artifacts);

}  // namespace troupe::engine
