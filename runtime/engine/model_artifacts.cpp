#include "runtime/engine/model_artifacts.hpp"

#include <map>

namespace troupe::engine {

Result<ModelArtifacts> load_model_artifacts(EngineConfig& config) {
  const std::string& path = config.model.model_path;
  if (path.empty()) return invalid_argument("no model file given");
  ModelArtifacts a;
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  a.file = std::shared_ptr<const gguf::GgufFile>(std::move(file).value());

  std::map<std::string, uint64_t> bytes;
  for (const auto& t : a.file->tensors())
    if (t.n_dims >= 2) bytes[std::string(to_string(t.type))] += t.nbytes;
  std::string most;
  uint64_t most_bytes = 0;
  for (const auto& [name, b] : bytes) {
    a.weight_types.push_back(name);
    if (b > most_bytes) most_bytes = b, most = name;
  }
  config.model.architecture = a.file->architecture();
  if (config.model.quantization.empty()) config.model.quantization = most;
  if (config.model.served_model_name.empty()) {
    auto slash = path.find_last_of('/');
    config.model.served_model_name = slash == std::string::npos ? path : path.substr(slash + 1);
  }

  auto tok = tokenizer::Tokenizer::from_gguf(*a.file);
  if (!tok) return Status(tok.status().code(), path + ": " + tok.status().message());
  a.tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok).value());

  auto forced = config.extra.find("chat_template");
  auto jinja = a.file->get_string("tokenizer.chat_template");
  auto tmpl = forced != config.extra.end() && !forced->second.empty() ? chat::by_name(forced->second)
              : jinja ? chat::detect(*jinja)
                      : Result<chat::ChatTemplate>(
                            not_found("the model file has no chat template; pass --chat-template NAME"));
  if (tmpl) a.chat_template = *tmpl;
  else a.chat_template_error = tmpl.status().message();
  return a;
}

Status verify_parallel_config(const EngineConfig& config, const ModelArtifacts& artifacts) {
  const int tp = config.parallel.tensor_parallel_size;
  const int pp = config.parallel.pipeline_parallel_size;
  if (tp < 1) return invalid_argument("tensor parallel size must be at least 1, got " + std::to_string(tp));
  if (pp < 1) return invalid_argument("pipeline parallel size must be at least 1, got " + std::to_string(pp));
  const std::string arch = artifacts.file->architecture();
  const auto heads = artifacts.file->get_int(arch + ".attention.head_count");
  const auto kv_heads = artifacts.file->get_int(arch + ".attention.head_count_kv");
  const auto layers = artifacts.file->get_int(arch + ".block_count");
  if (heads && *heads % tp != 0)
    return invalid_argument("Total number of attention heads (" + std::to_string(*heads) +
                            ") must be divisible by tensor parallel size (" + std::to_string(tp) + ").");
  if (kv_heads && *kv_heads % tp != 0)
    return invalid_argument("Total number of key-value heads (" + std::to_string(*kv_heads) +
                            ") must be divisible by tensor parallel size (" + std::to_string(tp) + ").");
  if (layers && *layers < pp)
    return invalid_argument("Number of layers (" + std::to_string(*layers) +
                            ") must be at least the pipeline parallel size (" + std::to_string(pp) + ").");
  return {};
}

Status verify_weight_types(const Platform& platform, const ModelArtifacts& artifacts) {
  for (const auto& type : artifacts.weight_types) TROUPE_RETURN_IF_ERROR(platform.verify_quantization(type));
  return {};
}

}  // namespace troupe::engine
