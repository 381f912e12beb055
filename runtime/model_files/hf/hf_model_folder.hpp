// A Hugging Face model folder as transformers and sentence-transformers write
// it: config.json, model.safetensors, tokenizer.json and, for
// sentence-transformers models, modules.json, the Pooling module's
// config.json (1_Pooling/config.json) and sentence_bert_config.json.
// HfModelFolder reads and validates them into plain structs; HfModelSource
// adapts the folder to the SDK's ModelSource (key mapping below).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_files/hf/hf_weight_shards.hpp"
#include "runtime/model_files/safetensors/safetensors_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::hf {

/// config.json: the fields an encoder (BERT family) needs. Absent fields keep
/// these defaults; present fields of the wrong JSON type are a data_loss.
struct ModelConfig {
  std::vector<std::string> architectures;  // ["BertModel"]
  std::string model_type;                  // "bert"
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_hidden_layers = 0;
  int64_t intermediate_size = 0;
  double layer_norm_eps = 1e-12;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;
  int64_t vocab_size = 0;
  int64_t pad_token_id = 0;
  std::string hidden_act;               // "gelu"
  std::string position_embedding_type;  // "absolute" (transformers' default when absent)
};

/// One entry of modules.json.
struct SentenceModule {
  int64_t idx = 0;
  std::string name;  // "1"
  std::string path;  // "1_Pooling" ("" for the Transformer itself)
  std::string type;  // "sentence_transformers.models.Pooling"
};

/// How token states become one vector (sentence-transformers' Pooling modes).
enum class PoolingMode { cls, max, mean, mean_sqrt_len, weighted_mean, last_token };
/// "cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken".
std::string_view to_string(PoolingMode mode);

/// The Pooling module's config.json (1_Pooling/config.json).
struct PoolingConfig {
  int64_t word_embedding_dimension = 0;
  /// The modes switched on, in sentence-transformers' concatenation order
  /// (cls, max, mean, mean_sqrt_len, weighted_mean, last_token); usually one.
  std::vector<PoolingMode> modes;
  bool include_prompt = true;
};

/// sentence-transformers' view of the folder.
struct SentenceTransformersConfig {
  std::vector<SentenceModule> modules;   // modules.json, in file order
  std::optional<PoolingConfig> pooling;  // when a Pooling module is listed
  bool normalize = false;                // a Normalize module is listed (L2-normalised embeddings)
  std::optional<int64_t> max_seq_length; // sentence_bert_config.json (vLLM caps the input there: 256 for MiniLM)
  bool do_lower_case = false;            // sentence_bert_config.json
  /// Module types other than Transformer, Pooling and Normalize (Dense, LayerNorm, ...):
  /// a caller that cannot run them must refuse the model.
  std::vector<std::string> other_module_types;
};

class HfModelFolder {
 public:
  /// Reads `dir`: config.json, tokenizer.json and model.safetensors (or the
  /// shards model.safetensors.index.json names) are required; modules.json (and
  /// what it names), sentence_bert_config.json and generation_config.json are
  /// read when present. Errors name the file: not_found for a missing file,
  /// shard or folder, data_loss for bad JSON or a mistyped field, not_supported
  /// for a tokenizer the tokenizer.json reader does not know. An encoder's
  /// (BERT's) tokenizer is read here; a decoder's only when tokenizer_ptr() is
  /// asked for (the workers that load weights never need it).
  static Result<std::unique_ptr<HfModelFolder>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  /// config.json as parsed (for keys ModelConfig does not name).
  const nlohmann::json& config_json() const { return config_json_; }
  /// Set when modules.json exists.
  const std::optional<SentenceTransformersConfig>& sentence_transformers() const { return st_; }
  /// The weights: one file or every shard, mapped.
  const HfWeightShards& shards() const { return *shards_; }
  /// The tokenizer (tokenizer.json); must have been read (an encoder's always is).
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  /// The tokenizer, read from tokenizer.json on the first call; its error otherwise.
  Result<std::shared_ptr<const tokenizer::Tokenizer>> tokenizer_ptr() const;
  /// generation_config.json as parsed (null when the folder has none).
  const nlohmann::json& generation_config_json() const { return generation_json_; }
  /// An encoder folder (model_type bert / BertModel).
  bool encoder() const;
  /// The longest input in tokens ([CLS] and [SEP] included): sentence_bert_config's
  /// max_seq_length when present (capped by max_position_embeddings), else max_position_embeddings.
  int64_t max_seq_length() const;
  /// config.architectures[0], else model_type.
  std::string architecture() const;

 private:
  HfModelFolder() = default;
  std::string dir_;
  ModelConfig config_;
  nlohmann::json config_json_;
  nlohmann::json pooling_json_;        // the Pooling module's config.json, or null
  nlohmann::json sentence_bert_json_;  // sentence_bert_config.json, or null
  std::optional<SentenceTransformersConfig> st_;
  nlohmann::json generation_json_;     // generation_config.json, or null
  std::unique_ptr<HfWeightShards> shards_;
  mutable std::mutex tokenizer_mu_;
  mutable std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  friend class HfModelSource;
};

/// troupe::ModelSource over an HfModelFolder (for Worker::load_model).
///   architecture()  config.architectures[0] ("BertModel"), else model_type
///   tensor(name)    the safetensors tensor of that name, PyTorch names as they
///                   are ("encoder.layer.0.attention.self.query.weight"); F32/F16/BF16
///                   only, shape reversed into ne (a [out, in] Linear has ne = {in, out})
///   get_int / get_float / get_string(key), looked up in this order:
///     "<key>"                      a top-level config.json key, verbatim ("hidden_size",
///                                  "layer_norm_eps", "hidden_act"); get_int also takes
///                                  booleans (0/1), get_float takes any number
///     "sentence_transformers.<k>"  sentence_bert_config.json's key ("max_seq_length",
///                                  "do_lower_case"), plus the computed
///                                  "sentence_transformers.normalize" (0/1)
///     "pooling.<k>"                the Pooling config's key ("word_embedding_dimension",
///                                  "pooling_mode_mean_tokens"), plus the computed
///                                  "pooling.mode" (string: "mean", or "cls+mean" when several)
///     "general.architecture"       model_type ("bert"), as in GGUF
///     llama.cpp's GGUF names, with <arch> = model_type, so one model factory reads
///     GGUF and HF sources alike:
///       <arch>.embedding_length           hidden_size
///       <arch>.block_count                num_hidden_layers
///       <arch>.feed_forward_length        intermediate_size
///       <arch>.attention.head_count       num_attention_heads
///       <arch>.attention.layer_norm_epsilon  layer_norm_eps
///       <arch>.context_length             max_position_embeddings
///       <arch>.vocab_size                 vocab_size
///       <arch>.pooling_type               llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last
///                                         (only with exactly one mode among those)
///       tokenizer.ggml.token_type_count   type_vocab_size
///   Absent keys and other JSON types give nullopt.
class HfModelSource final : public ModelSource {
 public:
  explicit HfModelSource(std::shared_ptr<const HfModelFolder> folder) : folder_(std::move(folder)) {}
  std::string architecture() const override { return folder_->architecture(); }
  const WeightTensor* tensor(std::string_view name) const override { return folder_->shards().tensor(name); }
  std::optional<int64_t> get_int(std::string_view key) const override;
  std::optional<double> get_float(std::string_view key) const override;
  std::optional<std::string> get_string(std::string_view key) const override;
  const HfModelFolder& folder() const { return *folder_; }

 private:
  /// The JSON value a key names (see the mapping above), or nullptr.
  const nlohmann::json* lookup(std::string_view key, nlohmann::json* computed) const;
  std::shared_ptr<const HfModelFolder> folder_;
};

}  // namespace troupe::hf
