// HfModelFolder and HfModelSource: a small synthetic sentence-transformers
// folder (and broken variants: each error must name its file), and the real
// all-MiniLM-L6-v2 folder when TROUPE_MINILM_DIR is set.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/model_files/hf/hf_model_folder.hpp"
#include "tests/runtime/model_files/safetensors/safetensors_writer.hpp"

namespace troupe::hf {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

json tokenizer_json() {
  json vocab = {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"hello", 4}, {"world", 5}};
  json added = json::array();
  for (int i = 0; i < 4; ++i) {
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (it.value() == i) added.push_back({{"id", i}, {"content", it.key()}, {"special", true}});
    }
  }
  return {{"added_tokens", added},
          {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", vocab}}}};
}

/// A tiny BERT sentence-transformers folder under the test's temp dir.
class Folder {
 public:
  Folder() : dir_(fs::path(::testing::TempDir()) / ("hf_folder_" + std::to_string(getpid()) + "_" +
                                                    std::to_string(counter_++))) {
    fs::create_directories(dir_ / "1_Pooling");
    config = {{"architectures", {"BertModel"}}, {"model_type", "bert"},     {"hidden_size", 8},
              {"num_attention_heads", 2},       {"num_hidden_layers", 1},   {"intermediate_size", 16},
              {"layer_norm_eps", 1e-12},        {"max_position_embeddings", 32}, {"type_vocab_size", 2},
              {"vocab_size", 6},                {"hidden_act", "gelu"},     {"pad_token_id", 0},
              {"use_cache", true}};
    modules = json::array({{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
                           {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}},
                           {{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}}});
    pooling = {{"word_embedding_dimension", 8}, {"pooling_mode_cls_token", false}, {"pooling_mode_mean_tokens", true},
               {"pooling_mode_max_tokens", false}, {"pooling_mode_mean_sqrt_len_tokens", false}};
    sentence_bert = {{"max_seq_length", 16}, {"do_lower_case", false}};
    tokenizer = tokenizer_json();
    weights.add_f32("embeddings.word_embeddings.weight", {6, 8}, std::vector<float>(48, 0.5f));
    weights.add_filled("embeddings.position_ids", "I64", {1, 32}, 8);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void write() const {
    write_json("config.json", config);
    write_json("modules.json", modules);
    write_json("1_Pooling/config.json", pooling);
    write_json("sentence_bert_config.json", sentence_bert);
    write_json("tokenizer.json", tokenizer);
    const auto bytes = weights.build();
    std::ofstream(dir_ / "model.safetensors", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  void write_json(const std::string& name, const json& j) const { std::ofstream(dir_ / name) << j.dump(); }
  void write_text(const std::string& name, const std::string& text) const { std::ofstream(dir_ / name) << text; }
  void remove(const std::string& name) const { fs::remove(dir_ / name); }
  std::string dir() const { return dir_.string(); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  json config, modules, pooling, sentence_bert, tokenizer;
  safetensors::testing::SafetensorsWriter weights;

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

void expect_error(const Folder& f, StatusCode code, const std::string& file, const std::string& fragment = "") {
  auto r = HfModelFolder::open(f.dir());
  ASSERT_FALSE(r.ok()) << "opened a broken folder (" << file << ")";
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_EQ(r.status().message().rfind(f.path(file), 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(HfModelFolder, ReadsASentenceTransformersFolder) {
  Folder f;
  f.write();
  auto r = HfModelFolder::open(f.dir() + "/");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const HfModelFolder& m = **r;
  EXPECT_EQ(m.dir(), f.dir());
  EXPECT_EQ(m.architecture(), "BertModel");
  EXPECT_EQ(m.config().model_type, "bert");
  EXPECT_EQ(m.config().hidden_size, 8);
  EXPECT_EQ(m.config().num_attention_heads, 2);
  EXPECT_EQ(m.config().num_hidden_layers, 1);
  EXPECT_EQ(m.config().intermediate_size, 16);
  EXPECT_EQ(m.config().layer_norm_eps, 1e-12);
  EXPECT_EQ(m.config().max_position_embeddings, 32);
  EXPECT_EQ(m.config().type_vocab_size, 2);
  EXPECT_EQ(m.config().vocab_size, 6);
  EXPECT_EQ(m.config().hidden_act, "gelu");
  EXPECT_EQ(m.config().position_embedding_type, "absolute");
  ASSERT_TRUE(m.sentence_transformers().has_value());
  const SentenceTransformersConfig& st = *m.sentence_transformers();
  EXPECT_EQ(st.modules.size(), 3u);
  EXPECT_EQ(st.modules[1].path, "1_Pooling");
  ASSERT_TRUE(st.pooling.has_value());
  EXPECT_EQ(st.pooling->modes, std::vector<PoolingMode>{PoolingMode::mean});
  EXPECT_EQ(st.pooling->word_embedding_dimension, 8);
  EXPECT_TRUE(st.normalize);
  EXPECT_EQ(st.max_seq_length, 16);
  EXPECT_TRUE(st.other_module_types.empty());
  EXPECT_EQ(m.max_seq_length(), 16);
  EXPECT_EQ(m.tokenizer().encode("Hello world", true, false), (std::vector<int32_t>{2, 4, 5, 3}));
  ASSERT_NE(m.shards().tensor("embeddings.word_embeddings.weight"), nullptr);
}

TEST(HfModelFolder, ModelSourceKeyMapping) {
  Folder f;
  f.write();
  auto r = HfModelFolder::open(f.dir());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  HfModelSource src(std::shared_ptr<const HfModelFolder>(std::move(*r)));
  const ModelSource& s = src;
  EXPECT_EQ(s.architecture(), "BertModel");
  const WeightTensor* emb = s.tensor("embeddings.word_embeddings.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne[0], 8);
  EXPECT_EQ(emb->ne[1], 6);
  EXPECT_EQ(s.tensor("embeddings.position_ids"), nullptr);  // I64
  EXPECT_EQ(s.tensor("nope"), nullptr);
  // config.json keys, verbatim.
  EXPECT_EQ(s.get_int("hidden_size"), 8);
  EXPECT_EQ(s.get_int("use_cache"), 1);
  EXPECT_EQ(s.get_float("layer_norm_eps"), 1e-12);
  EXPECT_EQ(s.get_float("hidden_size"), 8.0);
  EXPECT_EQ(s.get_int("layer_norm_eps"), std::nullopt);
  EXPECT_EQ(s.get_string("hidden_act"), "gelu");
  EXPECT_EQ(s.get_string("hidden_size"), std::nullopt);
  EXPECT_EQ(s.get_int("architectures"), std::nullopt);
  EXPECT_EQ(s.get_int("no_such_key"), std::nullopt);
  // sentence-transformers and pooling.
  EXPECT_EQ(s.get_int("sentence_transformers.max_seq_length"), 16);
  EXPECT_EQ(s.get_int("sentence_transformers.do_lower_case"), 0);
  EXPECT_EQ(s.get_int("sentence_transformers.normalize"), 1);
  EXPECT_EQ(s.get_string("pooling.mode"), "mean");
  EXPECT_EQ(s.get_int("pooling.word_embedding_dimension"), 8);
  EXPECT_EQ(s.get_int("pooling.pooling_mode_mean_tokens"), 1);
  // llama.cpp's GGUF names.
  EXPECT_EQ(s.get_string("general.architecture"), "bert");
  EXPECT_EQ(s.get_int("bert.embedding_length"), 8);
  EXPECT_EQ(s.get_int("bert.block_count"), 1);
  EXPECT_EQ(s.get_int("bert.feed_forward_length"), 16);
  EXPECT_EQ(s.get_int("bert.attention.head_count"), 2);
  EXPECT_EQ(s.get_float("bert.attention.layer_norm_epsilon"), 1e-12);
  EXPECT_EQ(s.get_int("bert.context_length"), 32);
  EXPECT_EQ(s.get_int("bert.vocab_size"), 6);
  EXPECT_EQ(s.get_int("bert.pooling_type"), 1);
  EXPECT_EQ(s.get_int("tokenizer.ggml.token_type_count"), 2);
  EXPECT_EQ(s.get_int("llama.embedding_length"), std::nullopt);
}

TEST(HfModelFolder, PlainTransformersFolder) {
  Folder f;
  f.write();
  f.remove("modules.json");
  auto r = HfModelFolder::open(f.dir());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE((*r)->sentence_transformers().has_value());
  EXPECT_EQ((*r)->max_seq_length(), 32);
  HfModelSource s(std::shared_ptr<const HfModelFolder>(std::move(*r)));
  EXPECT_EQ(s.get_int("bert.pooling_type"), std::nullopt);
  EXPECT_EQ(s.get_string("pooling.mode"), std::nullopt);
}

TEST(HfModelFolder, MissingFilesAreNamed) {
  auto none = HfModelFolder::open("/nonexistent/model-folder");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::not_found);
  EXPECT_NE(none.status().message().find("/nonexistent/model-folder"), std::string::npos);
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json"}) {
    Folder f;
    f.write();
    f.remove(name);
    expect_error(f, StatusCode::not_found, name);
  }
  Folder sharded;
  sharded.write();
  sharded.remove("model.safetensors");
  sharded.write_text("model.safetensors.index.json", "{}");
  expect_error(sharded, StatusCode::data_loss, "model.safetensors.index.json", "weight_map");
}

TEST(HfModelFolder, MalformedFilesAreNamed) {
  {
    Folder f;
    f.write();
    f.write_text("config.json", "{\"hidden_size\": ");
    expect_error(f, StatusCode::data_loss, "config.json", "not valid JSON at byte");
  }
  {
    Folder f;
    f.config["hidden_size"] = "384";
    f.write();
    expect_error(f, StatusCode::data_loss, "config.json", "hidden_size is a JSON string, expected an integer >= 1");
  }
  {
    Folder f;
    f.config["layer_norm_eps"] = -1;
    f.write();
    expect_error(f, StatusCode::data_loss, "config.json", "layer_norm_eps is -1, expected a positive number");
  }
  {
    Folder f;
    f.config["architectures"] = {"BertModel", 3};
    f.write();
    expect_error(f, StatusCode::data_loss, "config.json", "architectures");
  }
  {
    Folder f;
    f.write();
    f.write_text("config.json", "[]");
    expect_error(f, StatusCode::data_loss, "config.json", "expected an object");
  }
  {
    Folder f;
    f.modules = json::object();
    f.write();
    expect_error(f, StatusCode::data_loss, "modules.json", "expected an array");
  }
  {
    Folder f;
    f.modules[1]["path"] = "../elsewhere";
    f.write();
    expect_error(f, StatusCode::data_loss, "modules.json", "leaves the model folder");
  }
  {
    Folder f;
    f.pooling["pooling_mode_mean_tokens"] = false;
    f.write();
    expect_error(f, StatusCode::data_loss, "1_Pooling/config.json", "no pooling mode");
  }
  {
    Folder f;
    f.pooling["pooling_mode_cls_token"] = "yes";
    f.write();
    expect_error(f, StatusCode::data_loss, "1_Pooling/config.json", "pooling_mode_cls_token");
  }
  {
    Folder f;
    f.sentence_bert["max_seq_length"] = 0;
    f.write();
    expect_error(f, StatusCode::data_loss, "sentence_bert_config.json", "max_seq_length");
  }
  {
    Folder f;
    f.tokenizer["model"]["type"] = "Unigram";
    f.write();
    expect_error(f, StatusCode::not_supported, "tokenizer.json", "model.type 'Unigram'");
  }
  {
    Folder f;
    f.write();
    f.write_text("model.safetensors", "not safetensors at all");
    expect_error(f, StatusCode::data_loss, "model.safetensors", "safetensors byte 0");
  }
}

TEST(HfModelFolder, SeveralPoolingModesAndOtherModules) {
  Folder f;
  f.pooling["pooling_mode_cls_token"] = true;
  f.modules.push_back({{"idx", 3}, {"name", "3"}, {"path", "3_Dense"}, {"type", "sentence_transformers.models.Dense"}});
  f.write();
  auto r = HfModelFolder::open(f.dir());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& st = *(*r)->sentence_transformers();
  EXPECT_EQ(st.pooling->modes, (std::vector<PoolingMode>{PoolingMode::cls, PoolingMode::mean}));
  EXPECT_EQ(st.other_module_types, std::vector<std::string>{"sentence_transformers.models.Dense"});
  HfModelSource s(std::shared_ptr<const HfModelFolder>(std::move(*r)));
  EXPECT_EQ(s.get_string("pooling.mode"), "cls+mean");
  EXPECT_EQ(s.get_int("bert.pooling_type"), std::nullopt);
}

TEST(HfModelFolder, RealMiniLm) {
  const char* dir = std::getenv("TROUPE_MINILM_DIR");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/fetch-model.sh all-MiniLM-L6-v2)";
  auto r = HfModelFolder::open(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const HfModelFolder& m = **r;
  EXPECT_EQ(m.architecture(), "BertModel");
  EXPECT_EQ(m.config().model_type, "bert");
  EXPECT_EQ(m.config().hidden_size, 384);
  EXPECT_EQ(m.config().num_hidden_layers, 6);
  EXPECT_EQ(m.config().num_attention_heads, 12);
  EXPECT_EQ(m.config().intermediate_size, 1536);
  EXPECT_EQ(m.config().layer_norm_eps, 1e-12);
  EXPECT_EQ(m.config().max_position_embeddings, 512);
  EXPECT_EQ(m.config().type_vocab_size, 2);
  EXPECT_EQ(m.config().vocab_size, 30522);
  EXPECT_EQ(m.config().hidden_act, "gelu");
  ASSERT_TRUE(m.sentence_transformers().has_value());
  const auto& st = *m.sentence_transformers();
  ASSERT_TRUE(st.pooling.has_value());
  EXPECT_EQ(st.pooling->modes, std::vector<PoolingMode>{PoolingMode::mean});
  EXPECT_EQ(st.pooling->word_embedding_dimension, 384);
  EXPECT_TRUE(st.normalize);
  EXPECT_EQ(st.max_seq_length, 256);
  EXPECT_FALSE(st.do_lower_case);  // the tokenizer lowercases; this flag is sentence-transformers' own
  EXPECT_TRUE(st.other_module_types.empty());
  EXPECT_EQ(m.max_seq_length(), 256);
  EXPECT_EQ(m.shards().tensors().size(), 103u);
  EXPECT_EQ(m.tokenizer().encode("Hello, world!", true, false), (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));

  HfModelSource s(std::shared_ptr<const HfModelFolder>(std::move(*r)));
  EXPECT_EQ(s.architecture(), "BertModel");
  EXPECT_EQ(s.get_int("bert.embedding_length"), 384);
  EXPECT_EQ(s.get_int("bert.block_count"), 6);
  EXPECT_EQ(s.get_int("bert.attention.head_count"), 12);
  EXPECT_EQ(s.get_float("bert.attention.layer_norm_epsilon"), 1e-12);
  EXPECT_EQ(s.get_int("bert.pooling_type"), 1);
  EXPECT_EQ(s.get_int("sentence_transformers.max_seq_length"), 256);
  EXPECT_EQ(s.get_int("sentence_transformers.normalize"), 1);
  const WeightTensor* q = s.tensor("encoder.layer.0.attention.self.query.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne[0], 384);
  EXPECT_EQ(q->ne[1], 384);
}

}  // namespace
}  // namespace troupe::hf
