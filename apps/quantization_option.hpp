// --quantization (vLLM's flag) on serve and generate: gguf or unset runs the file's own
// weight types; another name must be a load-time method a plugin registered
// (troupe/quantization.hpp). Checked before the server opens its port, so a wrong name
// stops start-up with one line.
#pragma once

#include <string>

#include "plugin_host/plugin_host.hpp"
#include "troupe/quantization.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

inline constexpr const char* kQuantizationHelp =
    "gguf or unset: the file's own weight types; or a load-time method a plugin registered (e.g. int8_channel, "
    "examples/int8_quant): f16/bf16/f32 matrices are converted as the model loads";

/// ok for "", "gguf" and a registered load-time method (general plugins are loaded to know);
/// otherwise invalid_argument "--quantization NAME: ..." listing the registered methods.
inline Status check_quantization_option(const std::string& name) {
  if (name.empty() || name == "gguf") return {};
  plugin_host::PluginHost::instance().load_all();  // general plugins register their formats
  const WeightFormat* f = weight_formats::find(name);
  if (f != nullptr && f->quantize_row != nullptr) return {};
  std::string list;
  for (const auto& m : weight_formats::load_time_methods()) list += (list.empty() ? "" : ", ") + m;
  return invalid_argument(
      "--quantization " + name + ": " +
      (f != nullptr ? "a weight type of GGUF files, not a load-time method" : "not a registered load-time method") +
      " (registered: " + (list.empty() ? "none" : list) +
      "; general plugins add them, see `troupe plugins`); gguf or unset runs the file's own "
      "weight types (requantize files with llama-quantize or troupe make-gguf)");
}

}  // namespace troupe::apps
