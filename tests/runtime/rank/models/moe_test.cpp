// The mixture-of-experts pieces without a platform: the router (as llama.cpp b11434's
// build_moe_ffn computes it), the grouping of a step's tokens by expert, the split over
// ranks, and the refusal of malformed MoE files (wrong expert counts and shapes) at load,
// each naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/llama_hparams.hpp"
#include "runtime/rank/models/moe_routing.hpp"
#include "runtime/rank/models/moe_shard.hpp"

namespace troupe::models {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(MoeRouter, SoftmaxOverEveryExpertThenTheTopKNormalized) {
  MoeRouter r{.n_expert = 4, .n_used = 2, .gating = MoeGating::softmax, .normalize = true};
  const float logits[] = {0.0f, 2.0f, 1.0f, -1.0f};
  MoeRoutes routes;
  route_tokens(r, logits, 1, &routes);
  ASSERT_EQ(routes.experts, (std::vector<int32_t>{1, 2}));
  const double e1 = std::exp(2.0), e2 = std::exp(1.0);
  EXPECT_NEAR(routes.weights[0], e1 / (e1 + e2), 1e-6);
  EXPECT_NEAR(routes.weights[1], e2 / (e1 + e2), 1e-6);
  r.normalize = false;  // OLMoE: the probabilities over all four
  route_tokens(r, logits, 1, &routes);
  const double all = 1.0 + e1 + e2 + std::exp(-1.0);
  EXPECT_NEAR(routes.weights[0], e1 / all, 1e-6);
  EXPECT_NEAR(routes.weights[1], e2 / all, 1e-6);
  r.scale = 2.5f;  // expert_weights_scale
  route_tokens(r, logits, 1, &routes);
  EXPECT_NEAR(routes.weights[0], 2.5 * e1 / all, 1e-5);
}

TEST(MoeRouter, SoftmaxWeightIsASoftmaxOverTheChosenLogits) {
  MoeRouter r{.n_expert = 4, .n_used = 2, .gating = MoeGating::softmax_weight};
  const float logits[] = {3.0f, -5.0f, 3.5f, 0.0f};
  MoeRoutes routes;
  route_tokens(r, logits, 1, &routes);
  ASSERT_EQ(routes.experts, (std::vector<int32_t>{2, 0}));
  EXPECT_NEAR(routes.weights[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-6);
  EXPECT_NEAR(routes.weights[0] + routes.weights[1], 1.0, 1e-6);
}

TEST(MoeRouter, TiesGoToTheLowerExpertOnEveryRow) {
  MoeRouter r{.n_expert = 4, .n_used = 2, .gating = MoeGating::softmax, .normalize = true};
  const float logits[] = {1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.5f, 0.5f, 0.5f};
  MoeRoutes routes;
  route_tokens(r, logits, 2, &routes);
  EXPECT_EQ(routes.experts, (std::vector<int32_t>{0, 1, 1, 2}));
}

TEST(MoeGroups, TokensGroupedByExpertOfThisRankInOrder) {
  MoeRoutes routes;
  routes.n_used = 2;
  routes.experts = {3, 1, 1, 0, 3, 2};  // tokens 0, 1, 2
  routes.weights = {0.6f, 0.4f, 0.7f, 0.3f, 0.9f, 0.1f};
  ExpertGroups g;
  group_by_expert(routes, 3, 0, 4, &g);
  EXPECT_EQ(g.expert, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(g.begin, (std::vector<int32_t>{0, 1, 3, 4, 6}));
  EXPECT_EQ(g.rows, (std::vector<int32_t>{1, 0, 1, 2, 0, 2}));
  EXPECT_EQ(g.weights, (std::vector<float>{0.3f, 0.4f, 0.7f, 0.1f, 0.6f, 0.9f}));
  EXPECT_EQ(g.largest, 2);
  group_by_expert(routes, 3, 2, 4, &g);  // a rank holding experts 2 and 3: local indices
  EXPECT_EQ(g.expert, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(g.rows, (std::vector<int32_t>{2, 0, 2}));
  group_by_expert(routes, 3, 4, 8, &g);  // none of this rank's experts was chosen
  EXPECT_EQ(g.groups(), 0);
}

// tiny-qwen3moe (16 experts of 128, top 4) as a GGUF, `edit` applied to its builder.
using Edit = void (*)(dummy::ModelShape&, gguf::GgufBuilder&);
std::unique_ptr<gguf::GgufModelSource> moe_file(Edit edit, const std::string& shape = "tiny-qwen3moe",
                                                const std::string& type = "f32") {
  auto spec = dummy::make_dummy_spec(shape, type, 1, 1);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  auto b = dummy::dummy_gguf(*spec);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (edit != nullptr) {
    dummy::ModelShape s = spec->shape;
    edit(s, *b);
  }
  auto image = b->build_in_memory(2);
  EXPECT_TRUE(image.ok()) << image.status().to_string();
  return std::make_unique<gguf::GgufModelSource>(image->file);
}

Status load(const ModelSource& src) {
  auto hp = read_llama_hparams(src);
  if (!hp.ok()) return hp.status();
  auto w = bind_llama_weights(src, *hp);
  return w.ok() ? Status{} : w.status();
}

TEST(MoeFiles, TheTinyShapesLoad) {
  for (const char* shape : {"tiny-qwen3moe", "tiny-olmoe", "tiny-mixtral", "tiny-gpt-oss"}) {
    auto src = moe_file(nullptr, shape);
    EXPECT_TRUE(load(*src).ok()) << shape << ": " << load(*src).to_string();
  }
  auto mxfp4 = moe_file(nullptr, "tiny-gpt-oss", "mxfp4");
  auto hp = read_llama_hparams(*mxfp4);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  auto w = bind_llama_weights(*mxfp4, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(static_cast<uint32_t>(w->layers[0].moe.gate[3].type), 39u);  // the experts MXFP4
  EXPECT_EQ(w->layers[0].wq->type, DType::q8_0);                        // the rest q8_0
  EXPECT_EQ(w->layers[0].moe.router->type, DType::f32);                 // the router f32
  EXPECT_EQ(w->layers[0].moe.gate.size(), 8u);
}

TEST(MoeFiles, ExpertCountsOutOfRangeAreRefusedByKey) {
  auto no_used = moe_file([](dummy::ModelShape&, gguf::GgufBuilder& b) { b.set_u32("qwen3moe.expert_used_count", 0); });
  Status s = load(*no_used);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(contains(s.message(), "'qwen3moe.expert_used_count' = 0 must be 1..expert_count (16)")) << s.message();
  auto too_many =
      moe_file([](dummy::ModelShape&, gguf::GgufBuilder& b) { b.set_u32("qwen3moe.expert_used_count", 17); });
  EXPECT_TRUE(contains(load(*too_many).message(), "expert_used_count' = 17")) << load(*too_many).message();
  auto huge = moe_file([](dummy::ModelShape&, gguf::GgufBuilder& b) { b.set_u32("qwen3moe.expert_count", 1u << 20); });
  EXPECT_TRUE(contains(load(*huge).message(), "expert_count' = 1048576 is out of range")) << load(*huge).message();
  auto no_ff = moe_file(
      [](dummy::ModelShape&, gguf::GgufBuilder& b) { b.set_u32("qwen3moe.expert_feed_forward_length", 0); });
  EXPECT_TRUE(contains(load(*no_ff).message(), "expert_feed_forward_length")) << load(*no_ff).message();
}

TEST(MoeFiles, ExpertTensorsThatDisagreeWithTheCountsAreRefusedByName) {
  // The file says 32 experts; its tensors hold 16.
  auto count = moe_file([](dummy::ModelShape&, gguf::GgufBuilder& b) { b.set_u32("qwen3moe.expert_count", 32); });
  Status s = load(*count);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(contains(s.message(), "'blk.0.ffn_gate_inp.weight' has shape {256, 16} but the hyperparameters need "
                                    "{256, 32}")) << s.message();
  // Each expert 256 rows by the key, 128 in the tensors.
  auto rows = moe_file(
      [](dummy::ModelShape&, gguf::GgufBuilder& b) { b.set_u32("qwen3moe.expert_feed_forward_length", 256); });
  s = load(*rows);
  EXPECT_TRUE(contains(s.message(), "'blk.0.ffn_gate_exps.weight' has shape {256, 128, 16} but the hyperparameters "
                                    "need {256, 256, 16} (expert_count 16)")) << s.message();
}

TEST(MoeFiles, MissingExpertTensorsAreNamed) {
  // A Mixtral (llama with an expert count) whose experts are absent.
  auto spec = dummy::make_dummy_spec("tiny", "f32", 1, 1);
  ASSERT_TRUE(spec.ok());
  auto b = dummy::dummy_gguf(*spec);
  ASSERT_TRUE(b.ok());
  b->set_u32("llama.expert_count", 8);
  b->set_u32("llama.expert_used_count", 2);
  (void)b->add_tensor("blk.0.ffn_gate_inp.weight", DType::f32, 256, 8, [](uint8_t*, int64_t, int64_t) {});
  auto image = b->build_in_memory(2);
  ASSERT_TRUE(image.ok());
  gguf::GgufModelSource src(image->file);
  Status s = load(src);
  EXPECT_EQ(s.code(), StatusCode::not_found);
  EXPECT_TRUE(contains(s.message(), "'blk.0.ffn_gate_exps.weight' is missing (architecture 'llama', expert_count 8; "
                                    "nor are the experts stored one by one as 'blk.0.ffn_gate.0.weight')"))
      << s.message();
}

TEST(MoeSplit, ExpertsOrRowsOverTheRanks) {
  auto src = moe_file(nullptr);
  auto hp = read_llama_hparams(*src);
  ASSERT_TRUE(hp.ok());
  auto w = bind_llama_weights(*src, *hp);
  ASSERT_TRUE(w.ok());
  const std::vector<MoeLayerWeights> layers = {w->layers[0].moe};
  auto ep = split_moe(hp->moe, layers, 3, 4, true);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->expert_begin, 12);
  EXPECT_EQ(ep->expert_end, 16);
  EXPECT_EQ(ep->ff_end - ep->ff_begin, 128);
  auto tp = split_moe(hp->moe, layers, 1, 4, false);
  ASSERT_TRUE(tp.ok());
  EXPECT_EQ(tp->expert_end - tp->expert_begin, 16);
  EXPECT_EQ(tp->ff_begin, 32);
  EXPECT_EQ(tp->ff_end, 64);
  EXPECT_FALSE(tp->adds_down_bias);
  // f32 rows split anywhere; a 256-element block type cannot split 128 rows in two.
  std::vector<MoeLayerWeights> quantized = layers;
  for (WeightTensor& d : quantized[0].down) d.type = DType::q4_k;
  auto refused = split_moe(hp->moe, quantized, 0, 2, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.status().message(), "--enable-expert-parallel splits whole experts instead"))
      << refused.status().message();
  auto too_many = split_moe(hp->moe, layers, 0, 32, true);
  EXPECT_FALSE(too_many.ok());
}

}  // namespace
}  // namespace troupe::models
