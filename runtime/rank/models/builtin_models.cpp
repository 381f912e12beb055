#include "runtime/rank/models/builtin_models.hpp"

#include "runtime/rank/models/bert_model.hpp"
#include "runtime/rank/models/gemma_model.hpp"
#include "runtime/rank/models/llama_model.hpp"
#include "troupe/model_registry.hpp"

namespace troupe::runtime {

void register_builtin_models() {
  // register_model is idempotent for the same factory, so calling this again is harmless.
  model_registry::register_model("llama", &models::LlamaModel::create);
  model_registry::register_model("LlamaForCausalLM", &models::LlamaModel::create);
  // Same block as llama with the differences of decoder_arch.hpp.
  model_registry::register_model("qwen2", &models::LlamaModel::create);
  model_registry::register_model("qwen3", &models::LlamaModel::create);
  model_registry::register_model("phi3", &models::LlamaModel::create);
  // The mixture-of-experts families (Mixtral is llama with an expert_count).
  model_registry::register_model("qwen3moe", &models::LlamaModel::create);
  model_registry::register_model("olmoe", &models::LlamaModel::create);
  model_registry::register_model("gpt-oss", &models::LlamaModel::create);
  model_registry::register_model("gemma2", &models::GemmaModel::create);
  model_registry::register_model("gemma3", &models::GemmaModel::create);
  model_registry::register_model("BertModel", &models::BertModel::create);
  model_registry::register_model("bert", &models::BertModel::create);
}

}  // namespace troupe::runtime
