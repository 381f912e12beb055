#include "runtime/models/builtin_models.hpp"

#include "runtime/models/bert_model.hpp"
#include "runtime/models/gemma_model.hpp"
#include "runtime/models/llama_model.hpp"
#include "troupe/model_registry.hpp"

namespace troupe::runtime {

void register_builtin_models() {
  // register_model is idempotent for the same factory, so calling this again is harmless.
  model_registry::register_model("llama", &models::LlamaModel::create);
  model_registry::register_model("LlamaForCausalLM", &models::LlamaModel::create);
  model_registry::register_model("gemma2", &models::GemmaModel::create);
  model_registry::register_model("gemma3", &models::GemmaModel::create);
  model_registry::register_model("BertModel", &models::BertModel::create);
  model_registry::register_model("bert", &models::BertModel::create);
}

}  // namespace troupe::runtime
