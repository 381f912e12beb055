// Gemma 2 / Gemma 3 metadata and tensors as llama.cpp b11434 reads them: the
// local/global layer pattern, defaults, query scaling, soft-caps, q/k norms, and
// clear errors for missing tensors and unsupported rope scaling. Tiny f32 GGUF
// files built in memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/gemma_hparams.hpp"

namespace troupe::models {
namespace {

constexpr int64_t kEmbd = 64, kFf = 96, kVocab = 50;
constexpr int kHeads = 2, kKvHeads = 1, kHeadDim = 32;

struct Built {
  gguf::GgufImage image;
  std::unique_ptr<gguf::GgufModelSource> source;
};

// A gemma file of `layers` layers; `edit` changes the metadata, `skip` drops a tensor.
Built build(const std::string& arch, int layers, const std::function<void(gguf::GgufBuilder&)>& edit = {},
            const std::string& skip = "") {
  gguf::GgufBuilder b;
  b.set_string("general.architecture", arch);
  const std::string p = arch + ".";
  b.set_u32(p + "embedding_length", kEmbd);
  b.set_u32(p + "block_count", static_cast<uint32_t>(layers));
  b.set_u32(p + "attention.head_count", kHeads);
  b.set_u32(p + "attention.head_count_kv", kKvHeads);
  b.set_u32(p + "attention.key_length", kHeadDim);
  b.set_u32(p + "attention.value_length", kHeadDim);
  b.set_u32(p + "feed_forward_length", kFf);
  b.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (edit) edit(b);
  auto zeros = [](uint8_t*, int64_t, int64_t) {};
  auto add = [&](const std::string& name, int64_t ne0, int64_t rows) {
    if (name == skip) return;
    ASSERT_TRUE(b.add_tensor(name, DType::f32, ne0, rows, zeros).ok()) << name;
  };
  add("token_embd.weight", kEmbd, kVocab);
  add("output_norm.weight", kEmbd, 1);
  for (int l = 0; l < layers; ++l) {
    const std::string n = "blk." + std::to_string(l) + ".";
    add(n + "attn_norm.weight", kEmbd, 1);
    add(n + "attn_q.weight", kEmbd, kHeads * kHeadDim);
    add(n + "attn_k.weight", kEmbd, kKvHeads * kHeadDim);
    add(n + "attn_v.weight", kEmbd, kKvHeads * kHeadDim);
    add(n + "attn_output.weight", kHeads * kHeadDim, kEmbd);
    if (arch == "gemma3") {
      add(n + "attn_q_norm.weight", kHeadDim, 1);
      add(n + "attn_k_norm.weight", kHeadDim, 1);
    }
    add(n + "post_attention_norm.weight", kEmbd, 1);
    add(n + "ffn_norm.weight", kEmbd, 1);
    add(n + "ffn_gate.weight", kEmbd, kFf);
    add(n + "ffn_up.weight", kEmbd, kFf);
    add(n + "ffn_down.weight", kFf, kEmbd);
    add(n + "post_ffw_norm.weight", kEmbd, 1);
  }
  Built out;
  auto img = b.build_in_memory();
  EXPECT_TRUE(img.ok()) << img.status().to_string();
  if (!img.ok()) return out;
  out.image = std::move(*img);
  out.source = std::make_unique<gguf::GgufModelSource>(out.image.file);
  return out;
}

std::vector<int> local_layers(const GemmaHParams& hp) {
  std::vector<int> out;
  for (int l = 0; l < hp.n_layer; ++l)
    if (hp.is_local[static_cast<size_t>(l)]) out.push_back(l);
  return out;
}

TEST(GemmaHParams, Gemma3FiveLocalLayersThenOneGlobal) {
  auto f = build("gemma3", 13, [](gguf::GgufBuilder& b) {
    b.set_u32("gemma3.attention.sliding_window", 512);
    b.set_f32("gemma3.rope.freq_base", 1e6f);
  });
  ASSERT_TRUE(f.source);
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(local_layers(*hp), (std::vector<int>{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12}));
  EXPECT_EQ(hp->sliding_window, 512);
  EXPECT_FLOAT_EQ(hp->rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(hp->rope_theta_local, 10000.0f);  // llama.cpp's default for gemma3's local layers
  EXPECT_FLOAT_EQ(hp->attn_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_EQ(hp->attn_softcap, 0.0f);
  EXPECT_EQ(hp->final_softcap, 0.0f);
  EXPECT_TRUE(hp->qk_norm);
  auto w = bind_gemma_weights(*f.source, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->output, w->token_embd);  // tied
  EXPECT_NE(w->layers[3].q_norm, nullptr);
}

TEST(GemmaHParams, Gemma3WithoutAWindowHasNoLocalLayers) {
  auto f = build("gemma3", 6);
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_TRUE(local_layers(*hp).empty());
}

TEST(GemmaHParams, Gemma3PatternKeyAndFinalSoftCap) {
  auto f = build("gemma3", 6, [](gguf::GgufBuilder& b) {
    b.set_u32("gemma3.attention.sliding_window", 128);
    b.set_u32("gemma3.attention.sliding_window_pattern", 3);
    b.set_f32("gemma3.rope.freq_base_swa", 5000.0f);
    b.set_f32("gemma3.final_logit_softcapping", 30.0f);
  });
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(local_layers(*hp), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_FLOAT_EQ(hp->rope_theta_local, 5000.0f);
  EXPECT_FLOAT_EQ(hp->final_softcap, 30.0f);
}

TEST(GemmaHParams, Gemma2DefaultsAlternateLayersAndSoftCap) {
  auto f = build("gemma2", 4, [](gguf::GgufBuilder& b) { b.set_f32("gemma2.rope.freq_base", 20000.0f); });
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(local_layers(*hp), (std::vector<int>{0, 2}));
  EXPECT_EQ(hp->sliding_window, 4096);
  EXPECT_FLOAT_EQ(hp->attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(hp->final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(hp->rope_theta_local, 20000.0f);  // gemma2: the global base unless the file says otherwise
  EXPECT_FALSE(hp->qk_norm);
  auto w = bind_gemma_weights(*f.source, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->layers[0].q_norm, nullptr);
}

TEST(GemmaHParams, Gemma2FileValuesWin) {
  auto f = build("gemma2", 2, [](gguf::GgufBuilder& b) {
    b.set_u32("gemma2.attention.sliding_window", 256);
    b.set_f32("gemma2.attn_logit_softcapping", 20.0f);
    b.set_f32("gemma2.final_logit_softcapping", 10.0f);
  });
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->sliding_window, 256);
  EXPECT_FLOAT_EQ(hp->attn_softcap, 20.0f);
  EXPECT_FLOAT_EQ(hp->final_softcap, 10.0f);
}

TEST(GemmaHParams, MissingTensorIsNamed) {
  auto f = build("gemma3", 2, {}, "blk.1.attn_k_norm.weight");
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  auto w = bind_gemma_weights(*f.source, *hp);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::not_found);
  EXPECT_NE(w.status().message().find("blk.1.attn_k_norm.weight"), std::string::npos) << w.status().message();
}

TEST(GemmaHParams, RopeScalingIsRefused) {
  auto f = build("gemma3", 2, [](gguf::GgufBuilder& b) { b.set_string("gemma3.rope.scaling.type", "linear"); });
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_FALSE(hp.ok());
  EXPECT_EQ(hp.status().code(), StatusCode::not_supported);
  EXPECT_NE(hp.status().message().find("linear"), std::string::npos);
}

TEST(GemmaHParams, OtherArchitecturesAreRefused) {
  auto f = build("llama", 1);
  auto hp = read_gemma_hparams(*f.source);
  ASSERT_FALSE(hp.ok());
  EXPECT_EQ(hp.status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace troupe::models
