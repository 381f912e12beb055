// The decoder families beside llama (qwen2, qwen3, phi3), Llama 3's RoPE scaling and the
// refusals, on files built by the dummy format's GGUF builder (small variants of the
// named shapes: fewer layers, a small vocabulary), read as the model reads any file.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/rank/models/llama_hparams.hpp"
#include "runtime/rank/models/rope_scaling.hpp"
#include "troupe/model_registry.hpp"

namespace troupe::models {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A named shape cut to `layers` blocks and a 1024-token vocabulary, dims optionally shrunk.
dummy::DummyModelSpec small(const std::string& name, int layers = 1) {
  auto spec = dummy::make_dummy_spec(name, "q8_0", 3, layers);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  spec->shape.n_vocab = 1024;
  return *spec;
}

// Phi-3-mini's blocks are 113M parameters: keep its structure at hidden 256.
void shrink(dummy::DummyModelSpec& spec) {
  spec.shape.n_embd = 256, spec.shape.n_head = 4, spec.shape.n_head_kv = 4, spec.shape.n_ff = 256;
}

using Edit = void (*)(gguf::GgufBuilder&);
std::unique_ptr<gguf::GgufModelSource> open(const dummy::DummyModelSpec& spec, Edit edit = nullptr) {
  auto b = dummy::dummy_gguf(spec);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (edit) edit(*b);
  auto image = b->build_in_memory(2);
  EXPECT_TRUE(image.ok()) << image.status().to_string();
  return std::make_unique<gguf::GgufModelSource>(image->file);
}

TEST(DecoderArchs, Qwen2HasNeoxRopeAndBoundBiases) {
  auto src = open(small("qwen2.5-0.5b"));
  auto hp = read_llama_hparams(*src);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->arch, "qwen2");
  EXPECT_TRUE(hp->rope_neox);
  EXPECT_FLOAT_EQ(hp->rope_theta, 1000000.0f);
  EXPECT_FALSE(hp->rope_scaling.active());
  auto w = bind_llama_weights(*src, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_NE(w->layers[0].bq, nullptr);
  EXPECT_EQ(w->layers[0].bq->ne[0], 896);
  EXPECT_EQ(w->layers[0].bk->ne[0], 128);  // 2 kv heads of 64
  EXPECT_EQ(w->layers[0].bv->ne[0], 128);
  EXPECT_TRUE(w->tied_output);
}

TEST(DecoderArchs, Qwen3HasHeadDim128AndQkNorms) {
  auto src = open(small("qwen3-0.6b"));
  auto hp = read_llama_hparams(*src);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->head_dim, 128);  // attention.key_length, not 1024 / 16
  EXPECT_TRUE(hp->qk_norm);
  auto w = bind_llama_weights(*src, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_NE(w->layers[0].q_norm, nullptr);
  EXPECT_EQ(w->layers[0].q_norm->ne[0], 128);
  EXPECT_EQ(w->layers[0].wq->ne[1], 16 * 128);
  EXPECT_EQ(w->layers[0].bq, nullptr);
}

TEST(DecoderArchs, Phi3SplitsFusedQkvAndGateUpAsLlamaCpp) {
  auto spec = small("phi3-mini");
  spec.shape.n_embd = 256, spec.shape.n_head = 4, spec.shape.n_head_kv = 2, spec.shape.n_ff = 512;
  auto src = open(spec);
  auto hp = read_llama_hparams(*src);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_TRUE(hp->fused_gate_up);
  EXPECT_EQ(hp->n_ff, 512);
  auto w = bind_llama_weights(*src, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const WeightTensor* qkv = src->tensor("blk.0.attn_qkv.weight");
  const WeightTensor* up = src->tensor("blk.0.ffn_up.weight");
  ASSERT_NE(qkv, nullptr);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(src->tensor("blk.0.ffn_gate.weight"), nullptr);
  const auto* base = static_cast<const uint8_t*>(qkv->data);
  const int64_t rb = 256 / 32 * 34;  // one q8_0 row of 256
  const auto& L = w->layers[0];
  EXPECT_EQ(L.wq->data, base);
  EXPECT_EQ(L.wk->data, base + 256 * rb);        // after the 4*64 q rows
  EXPECT_EQ(L.wv->data, base + (256 + 128) * rb);
  EXPECT_EQ(L.wv->ne[1], 128);
  // ggml_swiglu: the first half of ffn_up's rows is the gate (silu), the second the up.
  EXPECT_EQ(L.ffn_gate->data, up->data);
  EXPECT_EQ(L.ffn_up->data, static_cast<const uint8_t*>(up->data) + 512 * rb);
  EXPECT_EQ(L.ffn_up->ne[1], 512);
}

// A window under llama is Mistral's: every layer; phi3 files carry one that llama.cpp (and
// troupe) ignore; an absurd one is refused.
TEST(DecoderArchs, AMistralWindowUnderLlamaIsReadAndPhi3sIsNot) {
  auto mistral = read_llama_hparams(*open(small("mistral-7b-v0.1")));
  ASSERT_TRUE(mistral.ok()) << mistral.status().to_string();
  EXPECT_EQ(mistral->sliding_window, 4096);
  auto llama = read_llama_hparams(*open(small("tiny")));
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->sliding_window, 0);
  auto phi3 = read_llama_hparams(*open(small("phi3-mini")));
  ASSERT_TRUE(phi3.ok());
  EXPECT_EQ(phi3->sliding_window, 0);
  auto bad = read_llama_hparams(*open(small("tiny"), [](gguf::GgufBuilder& b) {
    b.set_u64("llama.attention.sliding_window", uint64_t{1} << 40);
  }));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(contains(bad.status().message(), "sliding_window")) << bad.status().message();
}

TEST(DecoderArchs, AMissingTensorIsNamed) {
  auto spec = small("qwen3-0.6b");
  spec.shape.qk_norm = false;  // a qwen3 file without its q/k norms
  auto src = open(spec);
  auto hp = read_llama_hparams(*src);
  ASSERT_TRUE(hp.ok());
  auto w = bind_llama_weights(*src, *hp);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::not_found);
  EXPECT_TRUE(contains(w.status().message(), "'blk.0.attn_q_norm.weight' is missing (architecture 'qwen3')"))
      << w.status().message();
}

TEST(DecoderArchs, AnUnsupportedArchitectureListsTheSupportedOnes) {
  auto spec = small("tiny");
  spec.shape.arch = "gemma2";
  auto src = open(spec);
  auto hp = read_llama_hparams(*src);
  ASSERT_FALSE(hp.ok());
  EXPECT_EQ(hp.status().code(), StatusCode::not_supported);
  EXPECT_TRUE(contains(hp.status().message(), "'gemma2'")) << hp.status().message();
  EXPECT_TRUE(contains(hp.status().message(), "llama, qwen2, qwen3, phi3")) << hp.status().message();
  // Through the registry, an unregistered one (a MoE family) lists what is registered.
  runtime::register_builtin_models();
  ModelContext ctx;
  auto m = model_registry::create("qwen2moe", *src, ctx);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(contains(m.status().message(), "'qwen2moe' is not supported")) << m.status().message();
  for (const char* a : {"llama", "qwen2", "qwen3", "phi3"}) EXPECT_TRUE(contains(m.status().message(), a)) << a;
}

// Experts in a family without a MoE variant are refused by name; under llama an expert
// count makes a Mixtral, whose missing expert tensors are named.
TEST(DecoderArchs, MixtureOfExpertsOutsideTheMoeFamiliesIsRefusedByName) {
  auto spec = small("tiny");
  spec.shape.arch = "qwen2";
  auto src = open(spec, [](gguf::GgufBuilder& b) { b.set_u32("qwen2.expert_count", 8); });
  auto hp = read_llama_hparams(*src);
  ASSERT_FALSE(hp.ok());
  EXPECT_EQ(hp.status().code(), StatusCode::not_supported);
  EXPECT_TRUE(contains(hp.status().message(), "mixture-of-experts")) << hp.status().message();
  EXPECT_TRUE(contains(hp.status().message(), "'qwen2.expert_count' = 8")) << hp.status().message();
  EXPECT_TRUE(contains(hp.status().message(), "qwen3moe, olmoe, gpt-oss")) << hp.status().message();
  auto exps = open(spec, [](gguf::GgufBuilder& b) {
    (void)b.add_tensor("blk.0.ffn_gate_inp.weight", DType::f32, 256, 8, [](uint8_t*, int64_t, int64_t) {});
  });
  auto hp2 = read_llama_hparams(*exps);
  ASSERT_FALSE(hp2.ok());
  EXPECT_TRUE(contains(hp2.status().message(), "'blk.0.ffn_gate_inp.weight'")) << hp2.status().message();
  auto mixtral = open(small("tiny"), [](gguf::GgufBuilder& b) {
    b.set_u32("llama.expert_count", 8);
    b.set_u32("llama.expert_used_count", 2);
  });
  auto hp3 = read_llama_hparams(*mixtral);
  ASSERT_TRUE(hp3.ok()) << hp3.status().to_string();
  EXPECT_EQ(hp3->moe.n_expert, 8);
  auto w = bind_llama_weights(*mixtral, *hp3);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::not_found);
  EXPECT_TRUE(contains(w.status().message(), "'blk.0.ffn_gate_inp.weight' is missing")) << w.status().message();
}

TEST(RopeScaling, Llama3FactorsAsTheConverterComputesThem) {
  // Llama 3.2: theta 500000, head dim 64, factor 32, low 1, high 4, original 8192.
  const auto f = llama3_rope_factors({32.0f, 1.0f, 4.0f, 8192.0f}, 500000.0f, 64);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[10], 1.0f);   // wavelength 2*pi*500000^(20/64) = 379 < 8192/4
  EXPECT_NEAR(f[16], 3.2923, 1e-3);  // wavelength 4443: smooth 0.28128, 1/((1-s)/32+s)
  EXPECT_FLOAT_EQ(f[31], 32.0f);  // wavelength above 8192
}

TEST(RopeScaling, TheTensorOrTheLlama3KeysGiveTheSameFactors) {
  auto tensor = open(small("llama-3.2-1b"));
  auto spec = small("llama-3.2-1b");
  spec.shape.llama3_rope.factor = 0;  // no rope_freqs tensor: the keys instead
  auto keys = open(spec, [](gguf::GgufBuilder& b) {
    b.set_string("llama.rope.scaling.type", "llama3");
    b.set_f32("llama.rope.scaling.factor", 32.0f);
    b.set_f32("llama.rope.scaling.low_freq_factor", 1.0f);
    b.set_f32("llama.rope.scaling.high_freq_factor", 4.0f);
    b.set_u32("llama.rope.scaling.original_context_length", 8192);
  });
  ASSERT_NE(tensor->tensor("rope_freqs.weight"), nullptr);
  auto a = read_llama_hparams(*tensor);
  auto b = read_llama_hparams(*keys);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(a->rope_scaling.description, "rope_freqs.weight");
  EXPECT_EQ(b->rope_scaling.description, "llama3 (keys)");
  ASSERT_EQ(a->rope_scaling.freq_factors.size(), 32u);
  EXPECT_EQ(a->rope_scaling.freq_factors, b->rope_scaling.freq_factors);
  // With both, the tensor wins (llama.cpp reads only the tensor).
  auto both = open(small("llama-3.2-1b"), [](gguf::GgufBuilder& b) {
    b.set_string("llama.rope.scaling.type", "llama3");
    b.set_f32("llama.rope.scaling.factor", 8.0f);
  });
  auto c = read_llama_hparams(*both);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rope_scaling.freq_factors, a->rope_scaling.freq_factors);
}

TEST(RopeScaling, LinearDividesEveryFrequencyAndAttnFactorScales) {
  auto src = open(small("tiny"), [](gguf::GgufBuilder& b) {
    b.set_string("llama.rope.scaling.type", "linear");
    b.set_f32("llama.rope.scaling.factor", 4.0f);
    b.set_f32("llama.rope.scaling.attn_factor", 0.5f);
  });
  auto hp = read_llama_hparams(*src);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  ASSERT_EQ(hp->rope_scaling.freq_factors.size(), 32u);  // head dim 64
  for (float f : hp->rope_scaling.freq_factors) EXPECT_FLOAT_EQ(f, 4.0f);
  EXPECT_FLOAT_EQ(hp->rope_scaling.mscale, 0.5f);
}

// YaRN as frequency factors (gpt-oss: head dim 64, base 150000, factor 32 from 4096): ggml's
// correction dims floor(8.09) = 8 and ceil(17.4) = 18, pairs below 8 unscaled, from 18 on
// interpolated by the whole factor, a linear ramp between; cos and sin times 1 + 0.1 ln 32.
TEST(RopeScaling, YarnIsFrequencyFactorsAsGgmlComputesThem) {
  auto spec = small("tiny");
  spec.shape.n_head = 4;  // head dim 64
  auto yarn = open(spec, [](gguf::GgufBuilder& b) {
    b.set_string("llama.rope.scaling.type", "yarn");
    b.set_f32("llama.rope.scaling.factor", 32.0f);
    b.set_u32("llama.rope.scaling.original_context_length", 4096);
    b.set_f32("llama.rope.freq_base", 150000.0f);
  });
  auto hp = read_llama_hparams(*yarn);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  const auto& f = hp->rope_scaling.freq_factors;
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i <= 8; ++i) EXPECT_FLOAT_EQ(f[i], 1.0f) << i;
  for (int i = 18; i < 32; ++i) EXPECT_FLOAT_EQ(f[i], 32.0f) << i;
  const double r = 1.0 - (13.0 - 8.0) / 10.0;  // pair 13, half way up the ramp
  EXPECT_NEAR(f[13], 1.0 / (r + (1.0 - r) / 32.0), 1e-4);
  EXPECT_NEAR(hp->rope_scaling.mscale, 1.0 + 0.1 * std::log(32.0), 1e-6);
  // Without a factor it is an error naming the keys.
  auto bare = open(small("tiny"), [](gguf::GgufBuilder& b) { b.set_string("llama.rope.scaling.type", "yarn"); });
  auto hp0 = read_llama_hparams(*bare);
  ASSERT_FALSE(hp0.ok());
  EXPECT_TRUE(contains(hp0.status().message(), "rope.scaling.factor")) << hp0.status().message();
}

TEST(RopeScaling, LongFactorsOutsidePhi3OrHalfAPairAreErrors) {
  // The longrope type needs its two tensors.
  auto type_only = open(small("tiny"), [](gguf::GgufBuilder& b) {
    b.set_string("llama.rope.scaling.type", "longrope");
  });
  auto hp1 = read_llama_hparams(*type_only);
  ASSERT_FALSE(hp1.ok());
  EXPECT_TRUE(contains(hp1.status().message(), "rope_factors_long.weight")) << hp1.status().message();
  // llama.cpp's llama graph reads no long/short factors: refused there, naming the tensor.
  auto in_llama = open(small("tiny"), [](gguf::GgufBuilder& b) {
    for (const char* n : {"rope_factors_long.weight", "rope_factors_short.weight"})
      (void)b.add_tensor(n, DType::f32, 32, 0, [](uint8_t*, int64_t, int64_t) {});
  });
  auto hp2 = read_llama_hparams(*in_llama);
  ASSERT_FALSE(hp2.ok());
  EXPECT_EQ(hp2.status().code(), StatusCode::not_supported);
  EXPECT_TRUE(contains(hp2.status().message(), "'rope_factors_long.weight'")) << hp2.status().message();
  EXPECT_TRUE(contains(hp2.status().message(), "'llama'")) << hp2.status().message();
  // Half a pair: the missing one is named.
  auto spec = small("phi3-mini");
  shrink(spec);
  auto half = open(spec, [](gguf::GgufBuilder& b) {
    (void)b.add_tensor("rope_factors_long.weight", DType::f32, 32, 0, [](uint8_t*, int64_t, int64_t) {});
  });
  auto hp3 = read_llama_hparams(*half);
  ASSERT_FALSE(hp3.ok());
  EXPECT_TRUE(contains(hp3.status().message(), "'rope_factors_short.weight' is missing")) << hp3.status().message();
  // A wrong length names the tensor.
  auto wrong = open(spec, [](gguf::GgufBuilder& b) {
    for (const char* n : {"rope_factors_long.weight", "rope_factors_short.weight"})
      (void)b.add_tensor(n, DType::f32, 16, 0, [](uint8_t*, int64_t, int64_t) {});
  });
  auto hp4 = read_llama_hparams(*wrong);
  ASSERT_FALSE(hp4.ok());
  EXPECT_TRUE(contains(hp4.status().message(), "rope_factors_")) << hp4.status().message();
  EXPECT_TRUE(contains(hp4.status().message(), "32 elements")) << hp4.status().message();
  auto bad = open(small("tiny"), [](gguf::GgufBuilder& b) {
    (void)b.add_tensor("rope_freqs.weight", DType::f32, 16, 0, [](uint8_t*, int64_t, int64_t) {});
  });
  auto hp5 = read_llama_hparams(*bad);
  ASSERT_FALSE(hp5.ok());
  EXPECT_TRUE(contains(hp5.status().message(), "'rope_freqs.weight'")) << hp5.status().message();
}

std::vector<float> tensor_values(const ModelSource& src, const char* name) {
  const WeightTensor* t = src.tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  const auto* f = static_cast<const float*>(t->data);
  return std::vector<float>(f, f + t->ne[0]);
}

// llama.cpp b11434 (llama_model::get_rope_factors): the long set when the per-sequence
// context exceeds original_context_length, else the short one; the engine's max_model_len is
// that context, the file's context_length when unset. attn_factor scales cos and sin either way.
TEST(RopeScaling, LongRopePicksItsSetOnceFromTheEngineContext) {
  auto spec = small("phi3.5-mini");
  shrink(spec);  // head dim 64: 32 pairs
  auto src = open(spec);
  const auto long_set = tensor_values(*src, "rope_factors_long.weight");
  const auto short_set = tensor_values(*src, "rope_factors_short.weight");
  ASSERT_EQ(long_set.size(), 32u);
  ASSERT_EQ(short_set.size(), 32u);
  EXPECT_NE(long_set, short_set);
  EXPECT_EQ(src->get_int("phi3.rope.scaling.original_context_length"), 4096);
  EXPECT_EQ(src->get_int("phi3.context_length"), 131072);
  // The converter's attn_factor for 128k from 4k: sqrt(1 + ln(32) / ln(4096)).
  const double attn = std::sqrt(1 + std::log(32.0) / std::log(4096.0));
  ASSERT_TRUE(src->get_float("phi3.rope.scaling.attn_factor").has_value());
  EXPECT_NEAR(*src->get_float("phi3.rope.scaling.attn_factor"), attn, 1e-6);
  struct Case {
    int64_t engine_context;
    bool want_long;
  };
  for (const Case c : {Case{0, true}, Case{131072, true}, Case{4097, true}, Case{4096, false}, Case{512, false}}) {
    SCOPED_TRACE("max_model_len " + std::to_string(c.engine_context));
    auto hp = read_llama_hparams(*src, c.engine_context);
    ASSERT_TRUE(hp.ok()) << hp.status().to_string();
    EXPECT_EQ(hp->rope_scaling.long_factors, c.want_long);
    EXPECT_EQ(hp->rope_scaling.freq_factors, c.want_long ? long_set : short_set);
    EXPECT_NEAR(hp->rope_scaling.mscale, attn, 1e-6);
    EXPECT_TRUE(contains(hp->rope_scaling.description, c.want_long ? "rope_factors_long" : "rope_factors_short"))
        << hp->rope_scaling.description;
  }
  // Without original_context_length, context_length is the original (llama.cpp's default):
  // no context exceeds it, so the short set runs.
  auto spec2 = spec;
  spec2.shape.rope_original_context = 0;
  spec2.shape.longrope = false;  // the tensors below instead
  auto no_original = open(spec2, [](gguf::GgufBuilder& b) {
    for (bool l : {true, false}) {
      (void)b.add_tensor(l ? "rope_factors_long.weight" : "rope_factors_short.weight", DType::f32, 32, 0,
                         [l](uint8_t* dst, int64_t, int64_t) {
                           for (int i = 0; i < 32; ++i) reinterpret_cast<float*>(dst)[i] = l ? 4.0f : 2.0f;
                         });
    }
  });
  auto hp = read_llama_hparams(*no_original);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_FALSE(hp->rope_scaling.long_factors);
  EXPECT_EQ(hp->rope_scaling.freq_factors, std::vector<float>(32, 2.0f));
}

TEST(DummyShapes, EachFamilyWritesTheTensorsAndKeysOfItsRealFiles) {
  struct Want {
    const char* shape;
    const char* arch;
    std::vector<const char*> present, absent;
  };
  const Want wants[] = {
      {"qwen2.5-0.5b", "qwen2", {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias", "blk.0.ffn_gate.weight"},
       {"output.weight", "rope_freqs.weight", "blk.0.attn_q_norm.weight"}},
      {"qwen3-0.6b", "qwen3", {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight", "blk.0.attn_q.weight"},
       {"blk.0.attn_q.bias", "output.weight"}},
      {"phi3-mini", "phi3", {"blk.0.attn_qkv.weight", "blk.0.ffn_up.weight", "output.weight"},
       {"blk.0.attn_q.weight", "blk.0.ffn_gate.weight"}},
      {"llama-3.2-1b", "llama", {"rope_freqs.weight", "blk.0.ffn_gate.weight"}, {"output.weight", "blk.0.attn_q.bias"}},
      {"phi3.5-mini", "phi3", {"rope_factors_long.weight", "rope_factors_short.weight", "blk.0.attn_qkv.weight"},
       {"rope_freqs.weight", "blk.0.attn_q.weight"}},
  };
  for (const Want& want : wants) {
    SCOPED_TRACE(want.shape);
    auto spec = small(want.shape);
    if (std::string(want.arch) == "phi3") shrink(spec);
    auto src = open(spec);
    EXPECT_EQ(src->architecture(), want.arch);
    for (const char* t : want.present) EXPECT_NE(src->tensor(t), nullptr) << t;
    for (const char* t : want.absent) EXPECT_EQ(src->tensor(t), nullptr) << t;
    const std::string p = std::string(want.arch) + ".";
    EXPECT_EQ(src->get_int(p + "block_count"), 1);
    EXPECT_TRUE(src->get_int(p + "embedding_length").has_value());
    EXPECT_TRUE(src->get_float(p + "rope.freq_base").has_value());
  }
  auto phi_spec = small("phi3-mini");
  shrink(phi_spec);
  auto phi = open(phi_spec);
  EXPECT_EQ(phi->get_int("phi3.attention.sliding_window"), 2047);
  EXPECT_EQ(phi->get_int("phi3.rope.scaling.original_context_length"), 4096);
  auto q3 = open(small("qwen3-0.6b"));
  EXPECT_EQ(q3->get_int("qwen3.attention.key_length"), 128);
  auto too_many = dummy::make_dummy_spec("qwen3-0.6b", "q8_0", 0, 29);
  ASSERT_FALSE(too_many.ok());
  EXPECT_TRUE(contains(too_many.status().message(), "1..28")) << too_many.status().message();
}

}  // namespace
}  // namespace troupe::models
