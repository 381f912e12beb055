// Example general plugin: registers the architecture "MyLlama" with the
// process-wide ModelRegistry. vLLM's dummy model plugin in C++.
//
// Registration must be safe to run again (every process that runs engine
// code loads general plugins, and an embedder may load them twice):
// registering the same factory pointer again is a no-op in ModelRegistry.
#include "troupe/model_registry.hpp"
#include "troupe/plugin.hpp"

namespace {

// A real plugin would build its model from `source` here.
troupe::Result<std::unique_ptr<troupe::Model>> make_my_llama(const troupe::ModelSource& /*source*/,
                                                             const troupe::ModelContext& /*context*/) {
  return troupe::not_supported("MyLlama is an example architecture with no implementation");
}

troupe::Status register_dummy_model() {
  troupe::model_registry::register_model("MyLlama", &make_my_llama);
  return {};
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("dummy_model", &register_dummy_model))
