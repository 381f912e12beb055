// Example general plugin: registers GPT-2 (GGUF general.architecture "gpt2") with the
// process-wide ModelRegistry, so `troupe generate`/`serve` run GPT-2 files once the plugin
// is on TROUPE_PLUGIN_PATH. The model (gpt2_model.hpp) is built from the SDK alone.
//
// Registration must be safe to run again (every process that runs engine code loads
// general plugins, and an embedder may load them twice): registering the same factory
// pointer again is a no-op in ModelRegistry.
#include "gpt2_model.hpp"
#include "troupe/model_registry.hpp"
#include "troupe/plugin.hpp"

namespace {

troupe::Status register_gpt2_model() {
  troupe::model_registry::register_model("gpt2", &gpt2::Gpt2Model::create);
  return {};
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("gpt2_model", &register_gpt2_model))
