#include "runtime/model_files/hf/hf_model_folder.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/text/json/json_io.hpp"

namespace troupe::hf {

namespace {

using json = nlohmann::json;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Typed reads of one JSON object's fields: absent (or null) keeps the default,
/// another JSON type is a data_loss naming the file and the key.
class Fields {
 public:
  Fields(const json& obj, const std::string& file) : obj_(obj), file_(file) {}

  Status bad(const std::string& key, const json& v, const std::string& expected) const {
    std::string got = v.is_number() || v.is_boolean() ? v.dump().substr(0, 40) : std::string("a JSON ") + v.type_name();
    return data_loss(file_ + ": " + key + " is " + got + ", expected " + expected);
  }

  const json* find(const std::string& key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  /// An integer in min..2^63-1 (min >= 0).
  Status integer(const std::string& key, int64_t min, int64_t* out) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    const std::optional<uint64_t> u = json_io::non_negative_integer(*v);
    if (!u || *u < static_cast<uint64_t>(min) || *u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return bad(key, *v, "an integer >= " + std::to_string(min));
    }
    *out = static_cast<int64_t>(*u);
    return {};
  }

  Status positive_number(const std::string& key, double* out) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>())) {
      return bad(key, *v, "a positive number");
    }
    *out = v->get<double>();
    return {};
  }

  Status string(const std::string& key, std::string* out) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_string()) return bad(key, *v, "a string");
    *out = v->get<std::string>();
    return {};
  }

  Status boolean(const std::string& key, bool* out) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_boolean()) return bad(key, *v, "true or false");
    *out = v->get<bool>();
    return {};
  }

  Status strings(const std::string& key, std::vector<std::string>* out) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_array()) return bad(key, *v, "an array of strings");
    for (const json& s : *v) {
      if (!s.is_string()) return bad(key, *v, "an array of strings");
      out->push_back(s.get<std::string>());
    }
    return {};
  }

 private:
  const json& obj_;
  const std::string& file_;
};

Result<json> read_object(const std::string& path) {
  auto doc = json_io::read_file(path, uint64_t{64} << 20);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) {
    return data_loss(path + ": the top level is a JSON " + std::string(doc->type_name()) + ", expected an object");
  }
  return std::move(*doc);
}

Status read_config(const json& c, const std::string& file, ModelConfig* m) {
  const Fields f(c, file);
  TROUPE_RETURN_IF_ERROR(f.strings("architectures", &m->architectures));
  TROUPE_RETURN_IF_ERROR(f.string("model_type", &m->model_type));
  TROUPE_RETURN_IF_ERROR(f.integer("hidden_size", 1, &m->hidden_size));
  TROUPE_RETURN_IF_ERROR(f.integer("num_attention_heads", 1, &m->num_attention_heads));
  TROUPE_RETURN_IF_ERROR(f.integer("num_hidden_layers", 1, &m->num_hidden_layers));
  TROUPE_RETURN_IF_ERROR(f.integer("intermediate_size", 1, &m->intermediate_size));
  TROUPE_RETURN_IF_ERROR(f.positive_number("layer_norm_eps", &m->layer_norm_eps));
  TROUPE_RETURN_IF_ERROR(f.integer("max_position_embeddings", 1, &m->max_position_embeddings));
  TROUPE_RETURN_IF_ERROR(f.integer("type_vocab_size", 0, &m->type_vocab_size));
  TROUPE_RETURN_IF_ERROR(f.integer("vocab_size", 1, &m->vocab_size));
  TROUPE_RETURN_IF_ERROR(f.integer("pad_token_id", 0, &m->pad_token_id));
  TROUPE_RETURN_IF_ERROR(f.string("hidden_act", &m->hidden_act));
  m->position_embedding_type = "absolute";
  return f.string("position_embedding_type", &m->position_embedding_type);
}

Status read_pooling(const json& p, const std::string& file, PoolingConfig* out) {
  const Fields f(p, file);
  TROUPE_RETURN_IF_ERROR(f.integer("word_embedding_dimension", 1, &out->word_embedding_dimension));
  TROUPE_RETURN_IF_ERROR(f.boolean("include_prompt", &out->include_prompt));
  static constexpr std::pair<const char*, PoolingMode> kFlags[] = {
      {"pooling_mode_cls_token", PoolingMode::cls},
      {"pooling_mode_max_tokens", PoolingMode::max},
      {"pooling_mode_mean_tokens", PoolingMode::mean},
      {"pooling_mode_mean_sqrt_len_tokens", PoolingMode::mean_sqrt_len},
      {"pooling_mode_weightedmean_tokens", PoolingMode::weighted_mean},
      {"pooling_mode_lasttoken", PoolingMode::last_token},
  };
  std::string mode;  // sentence-transformers' constructor argument, if a writer saved it
  TROUPE_RETURN_IF_ERROR(f.string("pooling_mode", &mode));
  for (const auto& [key, m] : kFlags) {
    bool on = false;
    TROUPE_RETURN_IF_ERROR(f.boolean(key, &on));
    if (on || (!mode.empty() && mode == to_string(m))) out->modes.push_back(m);
  }
  if (out->modes.empty()) {
    return data_loss(file + ": no pooling mode is switched on (pooling_mode_mean_tokens, pooling_mode_cls_token, ...)");
  }
  return {};
}

Status read_modules(const std::string& dir, SentenceTransformersConfig* st, json* pooling_json) {
  const std::string file = dir + "/modules.json";
  auto doc = json_io::read_file(file, uint64_t{1} << 20);
  if (!doc.ok()) return doc.status();
  if (!doc->is_array()) {
    return data_loss(file + ": the top level is a JSON " + std::string(doc->type_name()) + ", expected an array");
  }
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& m = (*doc)[i];
    const std::string where = file + " [" + std::to_string(i) + "]";
    if (!m.is_object()) return data_loss(where + ": not an object");
    SentenceModule mod;
    const Fields f(m, where);
    TROUPE_RETURN_IF_ERROR(f.integer("idx", 0, &mod.idx));
    TROUPE_RETURN_IF_ERROR(f.string("name", &mod.name));
    TROUPE_RETURN_IF_ERROR(f.string("path", &mod.path));
    TROUPE_RETURN_IF_ERROR(f.string("type", &mod.type));
    if (mod.type.empty()) return data_loss(where + ": no module type");
    if (mod.path.find("..") != std::string::npos || (!mod.path.empty() && mod.path[0] == '/')) {
      return data_loss(where + ": path '" + json_io::printable(mod.path) + "' leaves the model folder");
    }
    if (ends_with(mod.type, ".Pooling")) {
      const std::string pfile = dir + "/" + (mod.path.empty() ? "" : mod.path + "/") + "config.json";
      auto p = read_object(pfile);
      if (!p.ok()) return p.status();
      PoolingConfig pooling;
      TROUPE_RETURN_IF_ERROR(read_pooling(*p, pfile, &pooling));
      st->pooling = std::move(pooling);
      *pooling_json = std::move(*p);
    } else if (ends_with(mod.type, ".Normalize")) {
      st->normalize = true;
    } else if (!ends_with(mod.type, ".Transformer")) {
      st->other_module_types.push_back(mod.type);
    }
    st->modules.push_back(std::move(mod));
  }
  return {};
}

}  // namespace

std::string_view to_string(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::cls: return "cls";
    case PoolingMode::max: return "max";
    case PoolingMode::mean: return "mean";
    case PoolingMode::mean_sqrt_len: return "mean_sqrt_len_tokens";
    case PoolingMode::weighted_mean: return "weightedmean";
    case PoolingMode::last_token: return "lasttoken";
  }
  return "?";
}

Result<std::unique_ptr<HfModelFolder>> HfModelFolder::open(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return not_found(dir + ": no such model folder");
  if (!S_ISDIR(st.st_mode)) return invalid_argument(dir + ": not a folder (a Hugging Face model folder is expected)");

  std::unique_ptr<HfModelFolder> f(new HfModelFolder());
  f->dir_ = dir;
  const std::string config_path = dir + "/config.json";
  auto config = read_object(config_path);
  if (!config.ok()) return config.status();
  f->config_json_ = std::move(*config);
  TROUPE_RETURN_IF_ERROR(read_config(f->config_json_, config_path, &f->config_));

  if (exists(dir + "/modules.json")) {
    SentenceTransformersConfig stc;
    TROUPE_RETURN_IF_ERROR(read_modules(dir, &stc, &f->pooling_json_));
    const std::string sb_path = dir + "/sentence_bert_config.json";
    if (exists(sb_path)) {
      auto sb = read_object(sb_path);
      if (!sb.ok()) return sb.status();
      const Fields fields(*sb, sb_path);
      int64_t max_len = 0;
      TROUPE_RETURN_IF_ERROR(fields.integer("max_seq_length", 1, &max_len));
      if (max_len > 0) stc.max_seq_length = max_len;
      TROUPE_RETURN_IF_ERROR(fields.boolean("do_lower_case", &stc.do_lower_case));
      f->sentence_bert_json_ = std::move(*sb);
    }
    f->st_ = std::move(stc);
  }

  const std::string gen_path = dir + "/generation_config.json";
  if (exists(gen_path)) {
    auto gen = read_object(gen_path);
    if (!gen.ok()) return gen.status();
    f->generation_json_ = std::move(*gen);
  }

  auto shards = HfWeightShards::open(dir);
  if (!shards.ok()) return shards.status();
  f->shards_ = std::move(*shards);

  if (f->encoder()) {
    auto tok = f->tokenizer_ptr();
    if (!tok.ok()) return tok.status();
  }
  return f;
}

int64_t HfModelFolder::max_seq_length() const {
  const int64_t pos = config_.max_position_embeddings;
  if (st_ && st_->max_seq_length) return pos > 0 ? std::min(*st_->max_seq_length, pos) : *st_->max_seq_length;
  return pos;
}

bool HfModelFolder::encoder() const {
  return config_.model_type == "bert" || architecture() == "BertModel";
}

Result<std::shared_ptr<const tokenizer::Tokenizer>> HfModelFolder::tokenizer_ptr() const {
  std::lock_guard lock(tokenizer_mu_);
  if (tokenizer_) return tokenizer_;
  auto tok = tokenizer::Tokenizer::from_tokenizer_json(dir_ + "/tokenizer.json");
  if (!tok.ok()) return tok.status();
  tokenizer_ = std::move(*tok);
  return tokenizer_;
}

std::string HfModelFolder::architecture() const {
  return config_.architectures.empty() ? config_.model_type : config_.architectures[0];
}

const json* HfModelSource::lookup(std::string_view key, json* computed) const {
  const HfModelFolder& f = *folder_;
  auto field = [](const json& obj, std::string_view k) -> const json* {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(std::string(k));
    return it == obj.end() ? nullptr : &*it;
  };
  if (const json* v = field(f.config_json_, key)) return v;
  auto after = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
    return key.substr(prefix.size());
  };
  if (auto k = after("sentence_transformers.")) {
    if (*k == "normalize" && f.st_) return &(*computed = f.st_->normalize);
    return field(f.sentence_bert_json_, *k);
  }
  if (auto k = after("pooling.")) {
    if (*k == "mode" && f.st_ && f.st_->pooling) {
      std::string modes;
      for (PoolingMode m : f.st_->pooling->modes) {
        if (!modes.empty()) modes += '+';
        modes += to_string(m);
      }
      return &(*computed = modes);
    }
    return field(f.pooling_json_, *k);
  }
  if (key == "general.architecture") return &(*computed = f.config_.model_type);
  if (key == "tokenizer.ggml.token_type_count") return field(f.config_json_, "type_vocab_size");
  const std::string& arch = f.config_.model_type;
  if (arch.empty() || key.size() <= arch.size() || key.substr(0, arch.size()) != arch || key[arch.size()] != '.') {
    return nullptr;
  }
  const std::string_view gguf = key.substr(arch.size() + 1);
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"embedding_length", "hidden_size"},
      {"block_count", "num_hidden_layers"},
      {"feed_forward_length", "intermediate_size"},
      {"attention.head_count", "num_attention_heads"},
      {"attention.layer_norm_epsilon", "layer_norm_eps"},
      {"context_length", "max_position_embeddings"},
      {"vocab_size", "vocab_size"},
  };
  for (const auto& [from, to] : kAliases) {
    if (gguf == from) return field(f.config_json_, to);
  }
  if (gguf == "pooling_type" && f.st_ && f.st_->pooling && f.st_->pooling->modes.size() == 1) {
    switch (f.st_->pooling->modes[0]) {  // llama.cpp's llama_pooling_type
      case PoolingMode::mean: return &(*computed = 1);
      case PoolingMode::cls: return &(*computed = 2);
      case PoolingMode::last_token: return &(*computed = 3);
      default: return nullptr;
    }
  }
  return nullptr;
}

std::optional<int64_t> HfModelSource::get_int(std::string_view key) const {
  json computed;
  const json* v = lookup(key, &computed);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>() ? 1 : 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  return std::nullopt;
}

std::optional<double> HfModelSource::get_float(std::string_view key) const {
  json computed;
  const json* v = lookup(key, &computed);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<std::string> HfModelSource::get_string(std::string_view key) const {
  json computed;
  const json* v = lookup(key, &computed);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

}  // namespace troupe::hf
