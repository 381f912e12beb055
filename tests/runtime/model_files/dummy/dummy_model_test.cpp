// The dummy load format without a platform: named shapes against the real
// GGUFs they describe, clear errors for bad names, the synthetic tokenizer,
// determinism of the random bytes, and the GGUF file the builder writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>

#include "runtime/config/engine_config.hpp"
#include "kernels/cpu/quantize.hpp"
#include "runtime/text/chat/chat_template.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/dummy/synthetic_vocab.hpp"
#include "runtime/model_files/source/model_source.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::dummy {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string temp_path(const std::string& tag) {
  return "/tmp/troupe_dummy_test_" + std::to_string(::getpid()) + "_" + tag + ".gguf";
}

std::shared_ptr<const gguf::GgufFile> build(const std::string& shape, const std::string& type, uint64_t seed,
                                            int threads = 0) {
  auto spec = make_dummy_spec(shape, type, seed);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  if (!spec.ok()) return nullptr;
  auto b = dummy_gguf(*spec);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (!b.ok()) return nullptr;
  auto image = b->build_in_memory(threads);
  EXPECT_TRUE(image.ok()) << image.status().to_string();
  return image.ok() ? image->file : nullptr;
}

// The shape's numbers as the metadata of a real GGUF states them.
void expect_shape_matches_file(const ModelShape& s, const gguf::GgufFile& f) {
  EXPECT_EQ(f.get_int("llama.embedding_length"), s.n_embd);
  EXPECT_EQ(f.get_int("llama.block_count"), s.n_layer);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), s.n_head);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), s.n_head_kv);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), s.n_ff);
  EXPECT_EQ(f.get_int("llama.context_length"), s.n_ctx);
  ASSERT_NE(f.tensor("token_embd.weight"), nullptr);
  EXPECT_EQ(f.tensor("token_embd.weight")->ne[1], s.n_vocab);
  EXPECT_EQ(f.tensor("output.weight") == nullptr, s.tied_embeddings);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.rope.freq_base").value_or(10000.0)), s.rope_theta);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon").value_or(0)), s.rms_eps);
}

TEST(ModelShapes, Stories260kIsTheTestModelsShape) {
  auto file = gguf::GgufFile::open(std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto shape = find_model_shape("stories260k");
  ASSERT_TRUE(shape.ok());
  expect_shape_matches_file(*shape, **file);
}

TEST(ModelShapes, Smollm2IsSmolLM2sShape) {
  const char* path = std::getenv("TROUPE_TEST_MODEL");
  if (!path || !contains(path, "SmolLM2-135M")) GTEST_SKIP() << "set TROUPE_TEST_MODEL to a SmolLM2-135M GGUF";
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto shape = find_model_shape("smollm2-135m");
  ASSERT_TRUE(shape.ok());
  expect_shape_matches_file(*shape, **file);
}

TEST(ModelShapes, Llama32_1bHasItsPublishedShape) {
  auto s = find_model_shape("llama-3.2-1b");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->n_embd, 2048);
  EXPECT_EQ(s->n_layer, 16);
  EXPECT_EQ(s->n_head, 32);
  EXPECT_EQ(s->n_head_kv, 8);
  EXPECT_EQ(s->n_ff, 8192);
  EXPECT_EQ(s->n_vocab, 128256);
  EXPECT_FLOAT_EQ(s->rope_theta, 500000.0f);
  EXPECT_TRUE(s->tied_embeddings);
}

TEST(ModelShapes, BadNamesListTheValidOnes) {
  auto shape = make_dummy_spec("llama-9b", "q8_0", 0);
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), StatusCode::invalid_argument);
  for (const auto& s : model_shapes()) EXPECT_TRUE(contains(shape.status().message(), s.name)) << s.name;
  EXPECT_TRUE(contains(shape.status().message(), "'llama-9b'"));

  auto type = make_dummy_spec("tiny", "q3_x", 0);
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().code(), StatusCode::invalid_argument);
  for (const char* t : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k",
                        "q6_k", "iq4_nl", "iq4_xs"})
    EXPECT_TRUE(contains(type.status().message(), t)) << t;

  auto empty = make_dummy_spec("", "", 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(contains(empty.status().message(), "llama-3.2-1b"));
}

TEST(ModelShapes, ATypeWhoseBlocksDoNotFitNamesTheRows) {
  auto s = make_dummy_spec("smollm2-135m", "q4_k", 0);  // hidden 576 is not a multiple of 256
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.status().message(), "576 (hidden size)")) << s.status().message();
  EXPECT_TRUE(contains(s.status().message(), "q8_0")) << s.status().message();  // a type that fits
  auto t = make_dummy_spec("stories260k", "q8_0", 0);  // ffn 172
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(contains(t.status().message(), "172 (feed-forward size)")) << t.status().message();
  EXPECT_TRUE(make_dummy_spec("stories260k", "f16", 0).ok());
  for (DType type : dummy_weight_types()) EXPECT_TRUE(make_dummy_spec("tiny", to_string(type), 0).ok());
  EXPECT_EQ(make_dummy_spec("tiny", "", 0)->weight_type, DType::q8_0);  // the default
}

TEST(SyntheticVocab, HasExactlyTheShapesSizeWithUniqueTokens) {
  for (const auto& shape : model_shapes()) {
    auto v = make_synthetic_vocab(shape.n_vocab, vocab_style_of(shape.arch));
    ASSERT_TRUE(v.ok()) << shape.name;
    EXPECT_EQ(static_cast<int64_t>(v->tokens.size()), shape.n_vocab);
    EXPECT_EQ(static_cast<int64_t>(v->types.size()), shape.n_vocab);
    const auto n_control = std::count(v->types.begin(), v->types.end(), 3);
    EXPECT_EQ(static_cast<int64_t>(v->merges.size()), shape.n_vocab - 256 - n_control);
    std::unordered_set<std::string> seen(v->tokens.begin(), v->tokens.end());
    EXPECT_EQ(seen.size(), v->tokens.size()) << shape.name;
  }
  EXPECT_FALSE(make_synthetic_vocab(260).ok());
}

TEST(SyntheticVocab, EncodesAndDecodesAnyText) {
  auto file = build("tiny", "q8_0", 0);
  ASSERT_TRUE(file);
  auto tok = gguf::read_tokenizer(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const auto& t = **tok;
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.model_type(), "bpe");
  for (const std::string& text : {std::string("Hello, world!\nThe cat sat on the mat."), std::string("Grüße, 東京 🚀"),
                                 std::string("\x01\xff binary \t bytes", 18), std::string("")}) {
    const auto ids = t.encode(text, /*add_special=*/false, /*parse_special=*/false);
    for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < 512);
    // Byte-level BPE as llama.cpp: an invalid UTF-8 byte (the 0xFF) comes back as U+FFFD.
    std::string want = text;
    if (const size_t ff = want.find('\xff'); ff != std::string::npos) want.replace(ff, 1, "\xEF\xBF\xBD");
    EXPECT_EQ(t.decode(ids), want);
  }
  // Common English merges: fewer tokens than bytes.
  const std::string english = "the tea is on the stone seat";
  EXPECT_LT(t.encode(english, false, false).size(), english.size());
  // BOS first with add_special; the chat tokens are control tokens that parse.
  const auto with_bos = t.encode("hi", true, false);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), t.bos_id());
  const auto chat = t.encode("<|im_start|>user\nhi<|im_end|>", false, true);
  EXPECT_EQ(chat.front(), t.token_id("<|im_start|>"));
  EXPECT_EQ(chat.back(), t.token_id("<|im_end|>"));
  EXPECT_TRUE(t.is_eog(t.eos_id()));
  EXPECT_TRUE(t.is_eog(chat.back()));
  auto tmpl = chat::detect(file->get_string("tokenizer.chat_template").value_or(""));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  EXPECT_EQ(tmpl->name, "chatml");
}

// llama.cpp looks up <unk>, <s>, </s> and <|endoftext|> by name when general.name says phi3
// (and refuses the file with unordered_map::at otherwise); Gemma files carry <start_of_turn>.
// Each family's specials are control tokens, in the roles its real files give them, and its
// template is recognised.
TEST(SyntheticVocab, EachFamilyHasItsRealSpecialTokensAndTemplate) {
  struct Want {
    VocabStyle style;
    std::vector<std::string> names;
    std::string bos, eos, eot, chat;
  };
  const std::vector<Want> wants = {
      {VocabStyle::chatml, {"<|im_start|>"}, "<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>", "chatml"},
      {VocabStyle::phi3, {"<unk>", "</s>", "<|assistant|>", "<|user|>", "<|system|>"}, "<s>", "<|endoftext|>",
       "<|end|>", "phi3"},
      {VocabStyle::gemma, {"<pad>", "<unk>", "<start_of_turn>"}, "<bos>", "<eos>", "<end_of_turn>", "gemma"},
  };
  for (const auto& w : wants) {
    auto v = make_synthetic_vocab(1000, w.style);
    ASSERT_TRUE(v.ok());
    auto id_of = [&](const std::string& name) {
      const auto it = std::find(v->tokens.begin(), v->tokens.end(), name);
      EXPECT_NE(it, v->tokens.end()) << name;
      const auto id = static_cast<int32_t>(it - v->tokens.begin());
      if (it != v->tokens.end()) {
        EXPECT_EQ(v->types[static_cast<size_t>(id)], 3) << name;
      }
      return id;
    };
    for (const auto& n : w.names) id_of(n);
    EXPECT_EQ(v->bos_id, id_of(w.bos));
    EXPECT_EQ(v->eos_id, id_of(w.eos));
    EXPECT_EQ(v->eot_id, id_of(w.eot));
    auto tmpl = chat::detect(v->chat_template);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
    EXPECT_EQ(tmpl->name, w.chat);
  }
  EXPECT_EQ(vocab_style_of("phi3"), VocabStyle::phi3);
  EXPECT_EQ(vocab_style_of("gemma3"), VocabStyle::gemma);
  EXPECT_EQ(vocab_style_of("qwen2"), VocabStyle::chatml);
  EXPECT_EQ(vocab_style_of("gpt2"), VocabStyle::gpt2);
  auto gpt2 = make_synthetic_vocab(1000, VocabStyle::gpt2);
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(gpt2->tokens.back(), "<|endoftext|>");
  EXPECT_EQ(gpt2->types.back(), 3);
  EXPECT_EQ(gpt2->bos_id, 999);
  EXPECT_EQ(gpt2->eos_id, 999);
  EXPECT_EQ(gpt2->unk_id, 999);
  EXPECT_EQ(gpt2->eot_id, -1);
  EXPECT_EQ(gpt2->pad_id, -1);
  EXPECT_FALSE(gpt2->add_bos);
  EXPECT_TRUE(gpt2->chat_template.empty());
}

TEST(DummyWeights, SameSeedSameBytesAnyThreadCount) {
  auto a = build("tiny", "q4_1", 7, 1);
  auto b = build("tiny", "q4_1", 7, 3);
  auto c = build("tiny", "q4_1", 8, 2);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    const auto& ta = a->tensors()[i];
    const auto& tb = b->tensors()[i];
    const auto& tc = c->tensors()[i];
    SCOPED_TRACE(ta.name);
    ASSERT_EQ(ta.nbytes, tb.nbytes);
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0);
    if (ta.n_dims == 2) {
      EXPECT_NE(std::memcmp(ta.data, tc.data, ta.nbytes), 0);  // another seed, other weights
      EXPECT_EQ(ta.type, DType::q4_1);
    } else {
      EXPECT_EQ(ta.type, DType::f32);  // norms: all 1
      const auto* v = static_cast<const float*>(ta.data);
      for (int64_t j = 0; j < ta.ne[0]; ++j) ASSERT_EQ(v[j], 1.0f);
    }
  }
  // Different tensors of one model differ too (each has its own seed).
  const auto* q = a->tensor("blk.0.attn_q.weight");
  const auto* o = a->tensor("blk.0.attn_output.weight");
  ASSERT_TRUE(q && o);
  EXPECT_NE(std::memcmp(q->data, o->data, q->nbytes), 0);
}

TEST(DummyWeights, FloatWeightsAreSmallAndSpread) {
  auto f = build("tiny", "f32", 3);
  ASSERT_TRUE(f);
  const auto* t = f->tensor("blk.1.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  const auto* v = static_cast<const float*>(t->data);
  const int64_t n = t->ne[0] * t->ne[1];
  double sum = 0, sq = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(v[i]));
    sum += v[i], sq += double(v[i]) * v[i], max_abs = std::max(max_abs, std::fabs(double(v[i])));
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(sd, 1.0 / 32 / std::sqrt(3.0), 1e-3);  // uniform on [-1/32, 1/32]
  EXPECT_LE(max_abs, 1.0 / 32);
}

// Every quantized type's fixed scales spread its random codes over about [-1/32, 1/32]
// (random_weights.hpp), read back with the kernels' dequantize_row.
TEST(DummyWeights, QuantizedWeightsAreSmallAndSpread) {
  for (DType type : dummy_weight_types()) {
    if (!traits(type).quantized) continue;
    SCOPED_TRACE(std::string(to_string(type)));
    auto f = build("tiny", std::string(to_string(type)), 3);
    ASSERT_TRUE(f);
    const auto* t = f->tensor("blk.1.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    const int64_t n = t->ne[0] * t->ne[1];
    std::vector<float> v(static_cast<size_t>(n));
    // The tensor's own type: mxfp4 is a mix (experts in MXFP4, the rest q8_0).
    kernels::cpu::dequantize_row(t->type, t->data, v.data(), n);
    double sum = 0, sq = 0, max_abs = 0;
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x));
      sum += x, sq += double(x) * x, max_abs = std::max(max_abs, std::fabs(double(x)));
    }
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    std::printf("%-6s mean %+.5f sd %.5f max %.5f (x 32: %+.3f %.3f %.3f)\n", std::string(to_string(type)).c_str(), mean,
                sd, max_abs, 32 * mean, 32 * sd, 32 * max_abs);
    EXPECT_LT(std::fabs(mean), 0.15 / 32);  // Q3_K's levels -4..3 lean a little positive
    EXPECT_GT(sd, 0.5 / 32);  // uniform: 0.577; 4 levels (Q2_K): 0.745; the IQ4 grid: 0.53
    EXPECT_LT(sd, 0.8 / 32);
    EXPECT_LE(max_abs, 1.0 / 32 * 1.01);  // f16 rounding of the scales
  }
}

TEST(DummyWeights, MetadataDescribesTheShape) {
  auto f = build("stories260k", "f16", 1);
  ASSERT_TRUE(f);
  auto shape = find_model_shape("stories260k");
  expect_shape_matches_file(*shape, *f);
  EXPECT_EQ(f->architecture(), "llama");
  EXPECT_EQ(f->get_string("troupe.dummy.shape"), "stories260k");
  EXPECT_EQ(f->get_int("troupe.dummy.seed"), 1);
  EXPECT_EQ(f->tensor("blk.4.ffn_down.weight")->type, DType::f16);
}

// GPT-2 in llama.cpp's gpt2 layout (src/models/gpt2.cpp's required tensors and keys; the
// keys its converter writes), with GPT-2's one special token and no chat template.
TEST(DummyWeights, Gpt2HasLlamaCppsGpt2Layout) {
  auto spec = make_dummy_spec("gpt2", "q8_0", 3, 2);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto b = dummy_gguf(*spec);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  auto image = b->build_in_memory();
  ASSERT_TRUE(image.ok()) << image.status().to_string();
  const gguf::GgufFile& f = *image->file;
  EXPECT_EQ(f.architecture(), "gpt2");
  for (auto [key, value] : {std::pair{"gpt2.context_length", 1024}, std::pair{"gpt2.embedding_length", 768},
                            std::pair{"gpt2.block_count", 2}, std::pair{"gpt2.feed_forward_length", 3072},
                            std::pair{"gpt2.attention.head_count", 12}})
    EXPECT_EQ(f.get_int(key), value) << key;
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("gpt2.attention.layer_norm_epsilon").value_or(0)), 1e-5f);
  for (const char* absent : {"gpt2.attention.head_count_kv", "gpt2.rope.freq_base", "gpt2.rope.dimension_count",
                             "gpt2.attention.layer_norm_rms_epsilon", "tokenizer.chat_template",
                             "tokenizer.ggml.eot_token_id", "tokenizer.ggml.padding_token_id"})
    EXPECT_FALSE(f.has(absent)) << absent;
  struct Want {
    std::string name;
    int64_t ne0, rows;
    DType type;
  };
  std::vector<Want> wants = {{"token_embd.weight", 768, 50257, DType::q8_0},
                             {"position_embd.weight", 768, 1024, DType::q8_0},
                             {"output_norm.weight", 768, 1, DType::f32},
                             {"output_norm.bias", 768, 1, DType::f32}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const Want& w : std::vector<Want>{{p + "attn_norm.weight", 768, 1, DType::f32},
                                           {p + "attn_norm.bias", 768, 1, DType::f32},
                                           {p + "attn_qkv.weight", 768, 3 * 768, DType::q8_0},
                                           {p + "attn_qkv.bias", 3 * 768, 1, DType::f32},
                                           {p + "attn_output.weight", 768, 768, DType::q8_0},
                                           {p + "attn_output.bias", 768, 1, DType::f32},
                                           {p + "ffn_norm.weight", 768, 1, DType::f32},
                                           {p + "ffn_norm.bias", 768, 1, DType::f32},
                                           {p + "ffn_up.weight", 768, 3072, DType::q8_0},
                                           {p + "ffn_up.bias", 3072, 1, DType::f32},
                                           {p + "ffn_down.weight", 3072, 768, DType::q8_0},
                                           {p + "ffn_down.bias", 768, 1, DType::f32}})
      wants.push_back(w);
  }
  EXPECT_EQ(f.tensors().size(), wants.size());  // tied: no output.weight, and nothing else
  for (const Want& w : wants) {
    const WeightTensor* t = f.tensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->ne[0], w.ne0) << w.name;
    EXPECT_EQ(t->rows(), w.rows) << w.name;
    EXPECT_EQ(t->type, w.type) << w.name;
  }
  // GPT-2's vocabulary: 256 bytes, 50000 merges, <|endoftext|> last as BOS, EOS and unknown.
  auto tok = gguf::read_tokenizer(f);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->token_id("<|endoftext|>"), 50256);
  EXPECT_EQ((*tok)->bos_id(), 50256);
  EXPECT_EQ((*tok)->eos_id(), 50256);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges")->size(), 50000u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "gpt-2");
  const auto ids = (*tok)->encode("Hello", /*add_special=*/true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 50256);  // no BOS added, as converted GPT-2 files say
}

TEST(DummyWeights, TheWrittenFileHoldsTheSameModel) {
  auto spec = make_dummy_spec("tiny", "q6_k", 11);
  ASSERT_TRUE(spec.ok());
  auto builder = dummy_gguf(*spec);
  ASSERT_TRUE(builder.ok());
  const std::string path = temp_path("roundtrip");
  ASSERT_TRUE(builder->write_file(path).ok());
  auto disk = gguf::GgufFile::open(path);
  ASSERT_TRUE(disk.ok()) << disk.status().to_string();
  auto memory = build("tiny", "q6_k", 11);
  ASSERT_TRUE(memory);
  EXPECT_EQ((*disk)->file_size(), builder->size());
  EXPECT_EQ((*disk)->keys(), memory->keys());
  EXPECT_EQ((*disk)->get_string_array("tokenizer.ggml.merges"), memory->get_string_array("tokenizer.ggml.merges"));
  ASSERT_EQ((*disk)->tensors().size(), memory->tensors().size());
  for (size_t i = 0; i < memory->tensors().size(); ++i) {
    const auto& d = (*disk)->tensors()[i];
    const auto& m = memory->tensors()[i];
    EXPECT_EQ(d.name, m.name);
    ASSERT_EQ(d.nbytes, m.nbytes);
    EXPECT_EQ(std::memcmp(d.data, m.data, d.nbytes), 0) << d.name;
  }
  std::remove(path.c_str());
}

TEST(DummyWeights, OpenModelByLoadFormat) {
  ModelConfig c;
  c.load_format = "dummy";
  c.model_shape = "tiny";
  c.weight_type = "q4_0";
  c.seed = 5;
  auto a = engine::open_model(c);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(a->dummy);
  EXPECT_EQ(a->source->architecture(), "llama");
  auto b = engine::open_model(c);  // shared while the first is held
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->source->tensor("token_embd.weight")->data, b->source->tensor("token_embd.weight")->data);

  c.load_format = "safetensors";
  auto bad = engine::open_model(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(contains(bad.status().message(), "auto, dummy")) << bad.status().message();
  c.load_format = "dummy";
  c.model_shape = "nope";
  bad = engine::open_model(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(contains(bad.status().message(), "llama-3.2-1b")) << bad.status().message();
}

}  // namespace
}  // namespace troupe::dummy
