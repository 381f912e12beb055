#include "runtime/model_files/source/model_artifacts.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/model_files/hf/generation_config.hpp"
#include "runtime/model_files/hf/hf_model_folder.hpp"
#include "runtime/model_files/source/quantizing_source.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::engine {
namespace {

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The model file, or the dummy model's shape, for messages.
std::string model_label(const EngineConfig& config) {
  return config.model.load_format == "dummy" ? "dummy model " + config.model.model_shape : config.model.model_path;
}

/// The model's weight types, most bytes first in `most`: as the workers will hold them, so a
/// matrix a load-time method converts counts as the method's format.
void weight_types(const std::vector<const WeightTensor*>& tensors, const WeightFormat* method, ModelArtifacts& a,
                  std::string* most) {
  std::map<std::string, uint64_t> bytes;
  for (const WeightTensor* t : tensors) {
    if (t->n_dims < 2) continue;
    if (method != nullptr && converts_at_load(*method, *t)) {
      bytes[method->name] += static_cast<uint64_t>(std::max<int64_t>(0, row_bytes(method->id, t->ne[0])) * t->rows());
      ++a.converted_at_load;
    } else {
      bytes[std::string(to_string(t->type))] += t->nbytes;
    }
  }
  uint64_t most_bytes = 0;
  for (const auto& [name, b] : bytes) {
    a.weight_types.push_back(name);
    if (b > most_bytes) most_bytes = b, *most = name;
  }
}

std::string join_names(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// The registered load-time methods, for errors.
std::string load_time_methods_text() {
  const auto methods = weight_formats::load_time_methods();
  return "registered load-time methods: " + (methods.empty() ? std::string("none") : join_names(methods)) +
         " (general plugins add them, see `troupe plugins`); gguf or unset runs the file's own weight types";
}

/// The chat template: --chat-template's, else the model's own Jinja text (`model_jinja`), else
/// a built-in family. Only a bad --chat-template is an error: a model template that does not
/// compile falls back to a recognized built-in family (the error is kept for requests).
Status choose_chat_template(const EngineConfig& config, const std::optional<std::string>& model_jinja,
                            const std::string& model_origin, ModelArtifacts& a) {
  chat::ChatPromptSource& p = a.chat_prompt;
  const auto& tok = *a.tokenizer;
  p.bos_text = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  p.eos_text = tok.eos_id() >= 0 ? tok.token_to_piece(tok.eos_id(), true) : "";
  auto forced = config.extra.find("chat_template");
  if (forced != config.extra.end() && !forced->second.empty()) {
    const std::string& value = forced->second;
    if (auto named = chat::by_name(value); named.ok()) {
      p.builtin = *named;
      p.origin = "built-in template " + value + " (--chat-template)";
      return {};
    }
    auto text = chat::read_chat_template_arg(value);
    if (!text.ok()) return invalid_argument(text.status().message() + " (built-in names: chatml, smollm2, llama2, llama3, llama3.1, llama3.2, mistral, zephyr, phi3, gemma)");
    auto compiled = chat::compile_chat_template(*text);
    if (!compiled.ok()) return invalid_argument("--chat-template: " + compiled.status().message());
    p.jinja = std::move(compiled).value();
    p.origin = "--chat-template";
    return {};
  }
  if (!model_jinja) {
    p.error = "the model has no chat template; pass --chat-template (a Jinja file or string, or a built-in name)";
    return {};
  }
  auto compiled = chat::compile_chat_template(*model_jinja);
  if (compiled.ok()) {
    p.jinja = std::move(compiled).value();
    p.origin = model_origin;
    return {};
  }
  auto family = chat::detect(*model_jinja);
  if (family.ok()) {
    p.builtin = *family;
    p.origin = "built-in template " + family->name + " (the model's " + model_origin + " does not compile: " +
               compiled.status().message() + ")";
  } else {
    p.error = "the model's chat template (" + model_origin + ") does not compile: " + compiled.status().message() +
              "; pass --chat-template";
  }
  return {};
}

/// A Hugging Face folder's template: chat_template.jinja (transformers' newer layout), else
/// tokenizer_config.json's chat_template.
std::optional<std::string> folder_chat_template(const std::string& dir, std::string* origin) {
  std::ifstream jinja(dir + "/chat_template.jinja", std::ios::binary);
  if (jinja) {
    std::ostringstream s;
    s << jinja.rdbuf();
    *origin = "chat_template.jinja";
    return s.str();
  }
  std::ifstream cfg(dir + "/tokenizer_config.json", std::ios::binary);
  if (!cfg) return std::nullopt;
  const auto j = nlohmann::json::parse(cfg, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto t = chat::chat_template_from_tokenizer_config(j);
  if (!t.ok()) return std::nullopt;
  *origin = "tokenizer_config.json chat_template";
  return *t;
}

Status load_gguf(EngineConfig& config, ModelArtifacts& a, const WeightFormat* method, std::string* most) {
  const auto& file = *std::static_pointer_cast<const gguf::GgufFile>(a.model.owner);
  std::vector<const WeightTensor*> tensors;
  for (const auto& t : file.tensors()) tensors.push_back(&t);
  weight_types(tensors, method, a, most);
  config.model.architecture = file.architecture();
  auto tok = gguf::read_tokenizer(file);
  if (!tok) return Status(tok.status().code(), model_label(config) + ": " + tok.status().message());
  a.tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok).value());
  auto jinja = file.get_string("tokenizer.chat_template");
  return choose_chat_template(config, jinja ? std::optional<std::string>(*jinja) : std::nullopt,
                              "GGUF tokenizer.chat_template", a);
}

Status load_folder(EngineConfig& config, ModelArtifacts& a, const WeightFormat* method, std::string* most) {
  const auto& folder = *std::static_pointer_cast<const hf::HfModelFolder>(a.model.owner);
  std::vector<const WeightTensor*> tensors;
  for (const WeightTensor* t : folder.shards().tensors()) tensors.push_back(t);
  weight_types(tensors, method, a, most);
  config.model.architecture = folder.architecture();
  auto tok = folder.tokenizer_ptr();
  if (!tok) return tok.status();
  a.tokenizer = std::move(tok).value();
  a.encoder = folder.encoder();
  std::string origin;
  const auto jinja = folder_chat_template(config.model.model_path, &origin);
  TROUPE_RETURN_IF_ERROR(choose_chat_template(config, jinja, origin, a));
  if (!jinja && !a.chat_prompt.jinja && !a.chat_prompt.builtin)
    a.chat_prompt.error = "model " + base_name(config.model.model_path) + " has no chat template" +
                          (a.encoder ? " (an encoder)" : "; pass --chat-template");
  if (!a.encoder) return {};  // a decoder (HfDecoderSource has checked its architecture and tensors)
  const auto& st = folder.sentence_transformers();
  if (st && !st->other_module_types.empty())
    return not_supported(config.model.model_path + ": sentence-transformers module " + st->other_module_types.front() +
                         " is not supported (Transformer, Pooling and Normalize only)");
  config.model.pooling_type = "cls";
  config.model.pooling_normalize = false;
  if (st && st->pooling) {
    const auto& modes = st->pooling->modes;
    if (modes.size() != 1)
      return not_supported(config.model.model_path + ": the Pooling module combines " + std::to_string(modes.size()) +
                           " modes; one of mean, cls and last token is supported");
    switch (modes.front()) {
      case hf::PoolingMode::mean: config.model.pooling_type = "mean"; break;
      case hf::PoolingMode::cls: config.model.pooling_type = "cls"; break;
      case hf::PoolingMode::last_token: config.model.pooling_type = "last"; break;
      default:
        return not_supported(config.model.model_path + ": pooling mode " + std::string(hf::to_string(modes.front())) +
                             " is not supported (mean, cls or last token)");
    }
  }
  if (st) config.model.pooling_normalize = st->normalize;
  // Matryoshka models say so in config.json (sentence-transformers' "matryoshka_dimensions").
  const auto& cj = folder.config_json();
  // The folder may name its IO processor plugin (as vLLM reads "io_processor_plugin" from the model config).
  if (auto io = cj.find("io_processor_plugin"); io != cj.end() && io->is_string() && !config.extra.count("io_processor_plugin"))
    config.extra["io_processor_plugin"] = io->get<std::string>();
  const auto flag = cj.find("is_matryoshka");
  config.model.pooling_matryoshka =
      cj.contains("matryoshka_dimensions") || (flag != cj.end() && flag->is_boolean() && flag->get<bool>());
  const int64_t limit = folder.max_seq_length();
  if (limit > 0 && (config.model.max_model_len <= 0 || config.model.max_model_len > limit))
    config.model.max_model_len = limit;
  return {};
}

// vLLM's --generation-config: "auto" reads the model folder's generation_config.json (a GGUF
// file has none), "vllm" nothing, another value that folder's file.
Status load_generation_defaults(ModelConfig& model, const ModelArtifacts& a) {
  model.generation_defaults = {};
  const std::string& mode = model.generation_config;
  if (mode == "vllm") return {};
  if (mode.empty() || mode == "auto") {
    if (!a.model.folder) return {};
    const auto& folder = *std::static_pointer_cast<const hf::HfModelFolder>(a.model.owner);
    if (folder.generation_config_json().is_null()) return {};
    auto d = hf::read_generation_defaults(folder.generation_config_json(), folder.dir() + "/generation_config.json");
    if (!d) return d.status();
    model.generation_defaults = std::move(d).value();
    return {};
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(mode, ec))
    return invalid_argument("--generation-config " + mode + ": not a folder (auto, vllm or a folder holding "
                            "generation_config.json)");
  auto d = hf::read_generation_defaults_file(mode);
  if (!d) return d.status();
  model.generation_defaults = std::move(d).value();
  return {};
}

}  // namespace

Result<ModelArtifacts> load_model_artifacts(EngineConfig& config) {
  const std::string& path = config.model.model_path;
  const bool dummy = config.model.load_format == "dummy";
  if (path.empty() && !dummy) return invalid_argument("no model file given");
  if (!path.empty() && dummy)
    return invalid_argument("the dummy load format builds the model from its shape (" + config.model.model_shape +
                            "); it takes no model path, got " + path);
  ModelArtifacts a;
  auto opened = open_model(config.model);
  if (!opened) return opened.status();
  a.model = std::move(opened).value();
  std::string& quantization = config.model.quantization;
  if (quantization == "gguf") quantization.clear();  // vLLM's name for "the file's own types"
  const WeightFormat* method = load_time_method(quantization);
  if (method == nullptr && !quantization.empty() && weight_formats::find(quantization) == nullptr)
    return not_found("quantization '" + quantization + "' (--quantization) is not a registered method; " +
                     load_time_methods_text());
  std::string most;
  TROUPE_RETURN_IF_ERROR(a.model.folder ? load_folder(config, a, method, &most)
                                        : load_gguf(config, a, method, &most));
  if (method != nullptr && a.converted_at_load == 0)
    return invalid_argument("quantization " + quantization + " (--quantization) converts f16, bf16 and f32 matrices at "
                            "load, and " + model_label(config) + " has none (its matrices are " +
                            join_names(a.weight_types) + ")");
  // A weight type's name (not a method) is accepted only as what the file holds (an engine's
  // config carries the type it found).
  if (method == nullptr && !quantization.empty() &&
      std::find(a.weight_types.begin(), a.weight_types.end(), quantization) == a.weight_types.end())
    return invalid_argument("quantization " + quantization + " (--quantization) is a weight type, not a load-time "
                            "method, and " + model_label(config) + " holds " + join_names(a.weight_types) +
                            " (requantize files with llama-quantize or troupe make-gguf); " +
                            load_time_methods_text());
  if (quantization.empty()) quantization = most;
  TROUPE_RETURN_IF_ERROR(load_generation_defaults(config.model, a));
  if (config.model.served_model_name.empty()) {
    if (dummy) {
      auto spec = dummy::dummy_spec(config.model);  // already valid: open_model built it
      if (spec) config.model.served_model_name = dummy::dummy_model_name(*spec);
    } else {
      // vLLM names a model by its path as given; a GGUF file keeps troupe's name, its stem.
      config.model.served_model_name = a.model.folder ? path : base_name(path);
    }
  }

  std::string& runner = config.model.runner;
  if (runner.empty() || runner == "auto") runner = a.encoder ? "pooling" : "generate";
  if (runner != "generate" && runner != "pooling")
    return invalid_argument("unknown runner '" + runner + "' (generate, pooling or auto)");
  if (a.encoder && runner == "generate")
    return invalid_argument("model " + config.model.architecture +
                            " is an encoder: it runs with --runner pooling (embeddings), not generate");
  if (!a.encoder && runner == "pooling") {
    // A decoder's embedding: the last token's final hidden state, normalized (vLLM's default).
    config.model.pooling_type = "last";
    config.model.pooling_normalize = true;
  }
  return a;
}

Result<std::shared_ptr<const tokenizer::Tokenizer>> load_tokenizer(const OpenedModel& model) {
  if (!model.owner) return invalid_argument("load_tokenizer: no model is open");
  if (model.folder) return std::static_pointer_cast<const hf::HfModelFolder>(model.owner)->tokenizer_ptr();
  auto tok = gguf::read_tokenizer(*std::static_pointer_cast<const gguf::GgufFile>(model.owner));
  if (!tok) return tok.status();
  return std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok).value());
}

Status verify_parallel_config(const EngineConfig& config, const ModelArtifacts& artifacts) {
  const int tp = config.parallel.tensor_parallel_size;
  const int pp = config.parallel.pipeline_parallel_size;
  if (tp < 1) return invalid_argument("tensor parallel size must be at least 1, got " + std::to_string(tp));
  if (pp < 1) return invalid_argument("pipeline parallel size must be at least 1, got " + std::to_string(pp));
  const ModelSource& src = *artifacts.model.source;
  const std::string arch = src.get_string("general.architecture").value_or(src.architecture());
  const auto heads = src.get_int(arch + ".attention.head_count");
  const auto kv_heads = src.get_int(arch + ".attention.head_count_kv");
  const auto layers = src.get_int(arch + ".block_count");
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
