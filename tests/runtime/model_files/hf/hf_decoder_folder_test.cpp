// Hugging Face decoder folders against the GGUF of the same weights: for every
// architecture served (Llama, Mistral, Qwen2, Qwen3, Phi-3 with and without its
// long-context RoPE, Gemma 2, Gemma 3),
// `troupe make-gguf`'s builder writes a small random model both as a GGUF file
// and, with write_hf_folder, as an HF folder (HF tensor names, Q/K rows of
// llama un-permuted to rotary halves, Gemma norms minus 1). Both run through the
// real CPU platform plugin on token ids: greedy tokens must be equal and logits
// within kTol. Also: f16/bf16 folders, a sharded folder, and bad folders as
// one-line errors naming the file, tensor or key.
//
// Why kTol = 1e-4. The folder holds the GGUF's values exactly (f32 copies of
// f32/f16/bf16 matrices are the same bytes; norms 0 + 1 == 1 exactly). The only
// arithmetic difference is llama's: the GGUF rotates adjacent pairs of permuted
// rows, the folder rotates halves of unpermuted rows; each rotated value is the
// same float, but q.k sums the head's 64 products in another order, a relative
// difference of ~1e-7 per score that reaches the logits (|logit| < ~10) as about
// 1e-6. The other families compute the same floats in the same order (the test
// prints the largest difference: 0 for them, 2.4e-7 to 3.6e-7 for llama and
// mistral). A wrong mapping moves logits far above kTol: Q/K rows left permuted
// gave 0.034 on these small random weights (QkRowsLeftPermutedDoNotMatch).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/engine_core/in_process_executor.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/hf/hf_folder_writer.hpp"
#include "runtime/model_files/hf/hf_model_folder.hpp"
#include "runtime/model_files/source/model_source.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/protocol/rank_command.hpp"
#include "runtime/rank/runner/worker_runner.hpp"
#include "tests/platforms/cpu_test_platform.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;
constexpr double kTol = 1e-4;
constexpr int kSteps = 6;

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("troupe_hf_" + std::to_string(::getpid()) + "_" + name)).string();
}

struct GreedyRun {
  std::vector<int32_t> tokens;  // greedy continuation
  std::vector<float> logits;    // the logits of every step, one row after another
};

// Prefill `ids`, then kSteps greedy steps; every step's logits.
GreedyRun greedy(const std::string& path, const std::vector<int32_t>& ids) {
  GreedyRun out;
  Platform* platform = testing::cpu_platform();
  EXPECT_NE(platform, nullptr);
  if (!platform) return out;
  runtime::register_builtin_models();
  EngineConfig c;
  c.parallel.num_threads = 2;
  c.model.max_model_len = 64;
  c.model.model_path = path;
  EXPECT_TRUE(platform->check_and_update_config(c).ok());
  engine::InProcessExecutor ex(*platform);
  auto loaded = ex.run_on_all(engine::LoadModel{c});
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  if (!loaded.ok()) return out;
  auto plan = engine::set_up_kv_cache(ex, c, ex.driver()->init_reply().info.context_length, {.one_sequence = true});
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return out;
  const int bs = plan->spec.block_size;
  std::vector<int32_t> blocks;
  for (int i = 0; i * bs < 64; ++i) blocks.push_back(i);
  std::vector<int32_t> seq = ids;
  int done = 0;  // tokens already in the cache
  for (int step = 0; step <= kSteps; ++step) {
    ExecuteModelRequest req;
    auto& b = req.batch;
    const int n = static_cast<int>(seq.size()) - done;
    for (int i = done; i < static_cast<int>(seq.size()); ++i) {
      b.token_ids.push_back(seq[i]);
      b.positions.push_back(i);
      b.slot_mapping.push_back(i);
    }
    b.query_start = {0, n};
    b.seq_lens = {static_cast<int32_t>(seq.size())};
    b.block_tables = {blocks};
    b.logits_indices = {n - 1};
    auto r = ex.driver()->worker().execute_model(req);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return out;
    out.logits.insert(out.logits.end(), r->logits.begin(), r->logits.end());
    const auto best = std::max_element(r->logits.begin(), r->logits.end()) - r->logits.begin();
    done = static_cast<int>(seq.size());
    seq.push_back(static_cast<int32_t>(best));
    out.tokens.push_back(static_cast<int32_t>(best));
  }
  return out;
}

struct Written {
  std::string gguf, folder;
};

Written write_both(const std::string& shape, const std::string& type, const hf::HfFolderOptions& options = {},
                   const std::string& tag = "") {
  Written w{tmp(shape + type + tag + ".gguf"), tmp(shape + type + tag)};
  auto spec = dummy::make_dummy_spec(shape, type, 5);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  auto builder = dummy::dummy_gguf(*spec);
  EXPECT_TRUE(builder.ok());
  EXPECT_TRUE(builder->write_file(w.gguf).ok());
  auto image = builder->build_in_memory(1);
  EXPECT_TRUE(image.ok());
  const Status s = hf::write_hf_folder(spec->shape, *image->file, w.folder, options);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return w;
}

double max_diff(const GreedyRun& a, const GreedyRun& b) {
  if (a.logits.size() != b.logits.size() || a.logits.empty()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.logits.size(); ++i) m = std::max(m, std::fabs(double(a.logits[i]) - b.logits[i]));
  return m;
}

void expect_same(const std::string& shape, const std::string& type, const hf::HfFolderOptions& options = {},
                 const std::string& tag = "") {
  SCOPED_TRACE(shape + " " + type + " " + tag);
  const Written w = write_both(shape, type, options, tag);
  const std::vector<int32_t> prompt = {510, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100};  // > 4: past the windows
  const GreedyRun g = greedy(w.gguf, prompt);
  const GreedyRun f = greedy(w.folder, prompt);
  ASSERT_EQ(g.tokens.size(), static_cast<size_t>(kSteps + 1));
  EXPECT_EQ(f.tokens, g.tokens);
  const double d = max_diff(g, f);
  std::printf("[hf-vs-gguf] %-12s %-5s %-18s max |logit diff| %.3g over %zu logits\n", shape.c_str(), type.c_str(),
              tag.c_str(), d, g.logits.size());
  EXPECT_LE(d, kTol);
  fs::remove_all(w.folder);
  fs::remove(w.gguf);
}

TEST(HfDecoderFolder, EveryArchitectureMatchesItsGguf) {
  expect_same("tiny", "f32");
  expect_same("tiny-llama3", "f32");
  expect_same("tiny-qwen2", "f32");
  expect_same("tiny-qwen3", "f32");
  expect_same("tiny-phi3", "f32");
  expect_same("tiny-phi3.5", "f32");  // rope_scaling longrope: long/short factor lists, attention factor derived
  expect_same("tiny-gemma2", "f32");
  expect_same("tiny-gemma3", "f32");
  hf::HfFolderOptions mistral;
  mistral.architecture = "MistralForCausalLM";
  expect_same("tiny", "f32", mistral, "mistral");
}

// Mixtral, Qwen3-MoE and OLMoE folders: the router and each expert one by one
// (mlp.experts.E.*_proj, Mixtral's block_sparse_moe.experts.E.w1/w2/w3), read as the
// per-expert GGUF names beside the GGUF's merged 3-D tensors.
TEST(HfDecoderFolder, MixturesOfExpertsMatchTheirGguf) {
  expect_same("tiny-mixtral", "f32");
  expect_same("tiny-qwen3moe", "f32");
  expect_same("tiny-olmoe", "f32");
  hf::HfFolderOptions sharded;
  sharded.shards = 3;
  expect_same("tiny-qwen3moe", "bf16", sharded, "3 shards");
}

TEST(HfDecoderFolder, HalfPrecisionAndShardedFolders) {
  expect_same("tiny", "f16");
  expect_same("tiny-qwen2", "bf16");
  hf::HfFolderOptions sharded;
  sharded.shards = 3;
  expect_same("tiny-phi3", "f32", sharded, "3 shards");
}

// The control: a llama folder whose Q/K rows are left in the GGUF's permuted order (what
// a loader that neither un-permutes nor rotates halves would need) gives other logits, by
// far more than kTol: the un-permutation is what makes the folder match.
TEST(HfDecoderFolder, QkRowsLeftPermutedDoNotMatch) {
  hf::HfFolderOptions wrong;
  wrong.unpermute_qk = false;
  const Written w = write_both("tiny", "f32", wrong, "permuted");
  const std::vector<int32_t> prompt = {510, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100};
  const GreedyRun g = greedy(w.gguf, prompt);
  const GreedyRun f = greedy(w.folder, prompt);
  const double d = max_diff(g, f);
  std::printf("[hf-vs-gguf] Q/K rows left permuted: max |logit diff| %.3g\n", d);
  EXPECT_GT(d, 100 * kTol);
  fs::remove_all(w.folder);
  fs::remove(w.gguf);
}

// No copy at load: every matrix the model reads is the shard's mapped bytes (the same
// pointer the safetensors reader gives for its HF name); only 1-D tensors are copied.
TEST(HfDecoderFolder, MatricesAreTheMappedShardBytes) {
  hf::HfFolderOptions sharded;
  sharded.shards = 4;
  const Written w = write_both("tiny-qwen2", "bf16", sharded, "mapped");
  auto m = engine::open_model(w.folder);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const auto& folder = *std::static_pointer_cast<const hf::HfModelFolder>(m->owner);
  EXPECT_EQ(folder.shards().files().size(), 4u);
  uint64_t mapped = 0, copied = 0;
  for (int l = 0; l < 2; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    for (const auto& [gguf, hf_name] : {std::pair{"attn_q.weight", "self_attn.q_proj.weight"},
                                        std::pair{"attn_k.weight", "self_attn.k_proj.weight"},
                                        std::pair{"ffn_down.weight", "mlp.down_proj.weight"}}) {
      const WeightTensor* t = m->source->tensor(g + gguf);
      const WeightTensor* raw = folder.shards().tensor(h + hf_name);
      ASSERT_TRUE(t && raw) << gguf;
      EXPECT_EQ(t->data, raw->data) << gguf;
      EXPECT_EQ(t->type, DType::bf16);
      mapped += t->nbytes;
    }
    const WeightTensor* bias = m->source->tensor(g + "attn_q.bias");
    ASSERT_NE(bias, nullptr);
    EXPECT_EQ(bias->type, DType::f32);
    EXPECT_NE(bias->data, folder.shards().tensor(h + "self_attn.q_proj.bias")->data);
    copied += bias->nbytes;
  }
  EXPECT_EQ(m->source->tensor("token_embd.weight")->data, folder.shards().tensor("model.embed_tokens.weight")->data);
  EXPECT_LT(copied * 50, mapped);
  fs::remove_all(w.folder);
  fs::remove(w.gguf);
}

// End to end through OfflineGenerator: the folder's tokenizer.json (written from the GGUF's
// tokenizer) encodes as the GGUF's, and greedy generation gives the same tokens and text.
TEST(HfDecoderFolder, GeneratesTheGgufTextFromTheFolder) {
  for (const std::string shape : {"tiny-llama3", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const Written w = write_both(shape, "f32", {}, "gen");
    Platform* platform = testing::cpu_platform();
    ASSERT_NE(platform, nullptr);
    EngineConfig c;
    c.parallel.num_threads = 2;
    c.model.max_model_len = 64;
    auto from_gguf = generation::OfflineGenerator::create(*platform, c, w.gguf);
    ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().to_string();
    auto from_dir = generation::OfflineGenerator::create(*platform, c, w.folder);
    ASSERT_TRUE(from_dir.ok()) << from_dir.status().to_string();
    const std::string text = "Once upon a time, <|im_start|> Grüße 東京 12345";
    EXPECT_EQ((*from_dir)->tokenizer().encode(text, true, true), (*from_gguf)->tokenizer().encode(text, true, true));
    sampling::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 10;
    p.ignore_eos = true;
    auto a = (*from_gguf)->generate_text("Once upon a time", p);
    auto b = (*from_dir)->generate_text("Once upon a time", p);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(b->token_ids, a->token_ids);
    EXPECT_EQ(b->text, a->text);
    from_gguf->reset();
    from_dir->reset();
    fs::remove_all(w.folder);
    fs::remove(w.gguf);
  }
}

// --- bad folders: one-line errors naming what is wrong ---

std::string open_error(const std::string& dir) {
  auto m = engine::open_model(dir);
  EXPECT_FALSE(m.ok()) << dir << " opened";
  if (m.ok()) return "";
  const std::string msg = m.status().message();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  return msg;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

TEST(HfDecoderFolder, BadFoldersAreOneLineErrors) {
  hf::HfFolderOptions sharded;
  sharded.shards = 2;
  const Written w = write_both("tiny", "f32", sharded, "bad");
  const std::string d = w.folder;
  ASSERT_TRUE(engine::open_model(d).ok());
  const std::string config = read_json(d + "/config.json").dump();
  {  // a missing shard
    fs::rename(d + "/model-00002-of-00002.safetensors", d + "/moved");
    const std::string e = open_error(d);
    EXPECT_NE(e.find("model-00002-of-00002.safetensors: missing shard"), std::string::npos) << e;
    fs::rename(d + "/moved", d + "/model-00002-of-00002.safetensors");
  }
  {  // a missing tensor: the index and the shard without it
    auto index = read_json(d + "/model.safetensors.index.json");
    index["weight_map"].erase("model.layers.1.mlp.down_proj.weight");
    write_text(d + "/model.safetensors.index.json", index.dump());
    // The shard still holds it: found through the shard's own header.
    EXPECT_TRUE(engine::open_model(d).ok());
    auto c = read_json(d + "/config.json");
    c["num_hidden_layers"] = 3;
    write_text(d + "/config.json", c.dump());
    const std::string e = open_error(d);
    EXPECT_NE(e.find("tensor 'model.layers.2.input_layernorm.weight' is missing"), std::string::npos) << e;
    write_text(d + "/config.json", config);
  }
  {  // a shape that disagrees with config.json
    auto c = read_json(d + "/config.json");
    c["intermediate_size"] = 256;
    write_text(d + "/config.json", c.dump());
    const std::string e = open_error(d);
    EXPECT_NE(e.find("model.layers.0.mlp.gate_proj.weight' has shape [512, 256]"), std::string::npos) << e;
    EXPECT_NE(e.find("needs [256, 256]"), std::string::npos) << e;
    write_text(d + "/config.json", config);
  }
  {  // an unknown architecture
    auto c = read_json(d + "/config.json");
    c["architectures"] = {"FalconForCausalLM"};
    write_text(d + "/config.json", c.dump());
    const std::string e = open_error(d);
    EXPECT_NE(e.find("architecture 'FalconForCausalLM' is not supported"), std::string::npos) << e;
    EXPECT_NE(e.find("Gemma3ForCausalLM"), std::string::npos) << e;
    write_text(d + "/config.json", config);
  }
  {  // broken JSON: config.json and the index
    write_text(d + "/config.json", "{\"hidden_size\": 256,");
    std::string e = open_error(d);
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
    write_text(d + "/config.json", config);
    write_text(d + "/model.safetensors.index.json", "{\"weight_map\": [");
    e = open_error(d);
    EXPECT_NE(e.find("model.safetensors.index.json"), std::string::npos) << e;
    write_text(d + "/model.safetensors.index.json", "{\"weight_map\": {\"x\": \"../../etc/passwd\"}}");
    e = open_error(d);
    EXPECT_NE(e.find("is not a file name in the folder"), std::string::npos) << e;
  }
  fs::remove_all(d);
  fs::remove(w.gguf);
}

}  // namespace
}  // namespace troupe
