// GgufFile on real files (stories260K, the llama.cpp vocab files) and on
// valid files built in memory: every value type, every tensor type, v2 and v3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "tests/runtime/model_files/gguf/gguf_writer.hpp"

namespace troupe::gguf {
namespace {

using testing::GgufWriter;

const std::string kData = TROUPE_TEST_DATA_DIR;

std::unique_ptr<GgufFile> open_ok(const std::string& path) {
  auto r = GgufFile::open(path);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r.value()) : nullptr;
}

TEST(GgufFile, Stories260KMetadata) {
  auto f = open_ok(kData + "/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->architecture(), "llama");
  EXPECT_EQ(f->get_int("llama.context_length"), 2048);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->get_int("tokenizer.ggml.padding_token_id"), 4294967295);  // uint32 max stays positive
  EXPECT_EQ(f->type_of("llama.context_length"), ValueType::uint32);
  auto eps = f->get_float("llama.attention.layer_norm_rms_epsilon");
  ASSERT_TRUE(eps.has_value());
  EXPECT_NEAR(*eps, 1e-5, 1e-9);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");

  // Wrong-type lookups answer nullopt, never a converted value.
  EXPECT_FALSE(f->get_string("llama.context_length").has_value());
  EXPECT_FALSE(f->get_int("general.architecture").has_value());
  EXPECT_FALSE(f->get_float("llama.context_length").has_value());
  EXPECT_FALSE(f->get_bool("llama.context_length").has_value());
  EXPECT_FALSE(f->get_int("no.such.key").has_value());
  EXPECT_FALSE(f->has("no.such.key"));
  EXPECT_FALSE(f->type_of("no.such.key").has_value());

  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  auto scores = f->get_float_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.has_value());
  EXPECT_EQ(scores->size(), 512u);
  auto types = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ(types->size(), 512u);
  EXPECT_EQ((*types)[0], 2);  // unknown
  EXPECT_EQ((*types)[1], 3);  // control
  EXPECT_FALSE(f->get_float_array("tokenizer.ggml.tokens").has_value());
  EXPECT_FALSE(f->get_string_array("tokenizer.ggml.scores").has_value());

  auto keys = f->keys();
  EXPECT_EQ(keys.size(), 19u);
  EXPECT_EQ(keys.front(), "tokenizer.ggml.tokens");  // file order
}

TEST(GgufFile, Stories260KTensors) {
  auto f = open_ok(kData + "/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->tensors().size(), 2u + 5u * 9u + 1u);
  const WeightTensor* emb = f->tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::f32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->ne[2], 1);
  EXPECT_EQ(emb->nbytes, 64u * 512u * 4u);
  EXPECT_EQ(emb->rows(), 512);
  const WeightTensor* down = f->tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne[0], 172);
  EXPECT_EQ(down->ne[1], 64);
  EXPECT_EQ(f->tensor("blk.5.ffn_down.weight"), nullptr);

  uint64_t sum = 0;
  const auto* lo = static_cast<const uint8_t*>(f->tensors().front().data);
  for (const WeightTensor& t : f->tensors()) {
    sum += t.nbytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;  // mapping is page-aligned
    lo = std::min(lo, static_cast<const uint8_t*>(t.data));
  }
  EXPECT_EQ(sum, f->tensor_data_bytes());
  EXPECT_EQ(f->file_size(), 1185376u);

  // Weights are real numbers read through the mapping.
  const float* w = static_cast<const float*>(f->tensor("output_norm.weight")->data);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isfinite(w[i]));

  GgufModelSource src(std::shared_ptr<const GgufFile>(std::move(f)));
  EXPECT_EQ(src.architecture(), "llama");
  EXPECT_EQ(src.get_int("llama.block_count"), 5);
  EXPECT_NE(src.tensor("output.weight"), nullptr);
  EXPECT_EQ(src.get_string("general.name"), "llama");
}

TEST(GgufFile, VocabOnlyFiles) {
  struct Case { const char* file; const char* arch; size_t vocab; bool merges; };
  for (const Case& c : {Case{"ggml-vocab-bert-bge.gguf", "bert", 30522, false},
                        Case{"ggml-vocab-gpt-2.gguf", "gpt2", 50257, true},
                        Case{"ggml-vocab-llama-spm.gguf", "llama", 32000, false}}) {
    SCOPED_TRACE(c.file);
    auto f = open_ok(kData + "/vocab/" + c.file);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->architecture(), c.arch);
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_EQ(f->tensor_data_bytes(), 0u);
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.has_value());
    EXPECT_EQ(tokens->size(), c.vocab);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").has_value(), c.merges);
  }
  auto spm = open_ok(kData + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(spm->get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(spm->get_bool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_EQ(spm->get_int("tokenizer.ggml.add_bos_token"), 1);
}

TEST(GgufFile, OpenErrors) {
  auto missing = GgufFile::open(kData + "/does-not-exist.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  auto dir = GgufFile::open(kData);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::invalid_argument);
  auto text = GgufFile::open(kData + "/README.md");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::data_loss);
  EXPECT_NE(text.status().message().find("README.md"), std::string::npos);  // names the file
  EXPECT_NE(text.status().message().find("magic"), std::string::npos);
}

TEST(GgufFile, OpenEmptyFile) {
  const std::string path = std::string(TROUPE_BINARY_DIR) + "/gguf_empty_test.gguf";
  { std::ofstream out(path, std::ios::binary | std::ios::trunc); }
  auto r = GgufFile::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::data_loss);
  std::remove(path.c_str());
}

TEST(GgufFile, OpenIsMetadataOnly) {
  // An 8 GiB sparse file: opening must map it and read only the header, so it
  // succeeds without touching (or allocating for) the tensor bytes.
  const std::string path = std::string(TROUPE_BINARY_DIR) + "/gguf_sparse_test.gguf";
  const uint64_t rows = (uint64_t{8} << 30) / 4096;
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("huge", 0, {1024, rows}, 0, 0);
  auto bytes = w.build();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const uint64_t size = w.layout().data_start + rows * 4096;
  if (truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
    std::remove(path.c_str());
    GTEST_SKIP() << "filesystem cannot extend a sparse file";
  }
  auto r = GgufFile::open(path);
  std::remove(path.c_str());  // the mapping keeps the data alive
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()->file_size(), size);
  EXPECT_EQ(r.value()->tensor("huge")->nbytes, rows * 4096);
  EXPECT_EQ(r.value()->tensor_data_bytes(), rows * 4096);
  const auto* last = static_cast<const uint8_t*>(r.value()->tensor("huge")->data) + rows * 4096 - 1;
  EXPECT_EQ(*last, 0);  // the mapping covers the whole file
}

// Every metadata value type round-trips through the accessors, in v2 and v3.
class GgufVersions : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersions, AllValueTypes) {
  GgufWriter w;
  w.version = GetParam();
  w.kv_str("general.architecture", "qwen2");
  w.kv_u8("u8", 200);
  w.kv_i8("i8", -100);
  w.kv_u16("u16", 60000);
  w.kv_i16("i16", -30000);
  w.kv_u32("u32", 4000000000u);
  w.kv_i32("i32", -2000000000);
  w.kv_u64("u64", 1ull << 40);
  w.kv_u64("u64max", ~0ull);
  w.kv_i64("i64", -(1ll << 50));
  w.kv_f32("f32", 0.5f);
  w.kv_f64("f64", -2.25);
  w.kv_bool("yes", true);
  w.kv_bool("no", false);
  w.kv_str("empty", "");
  w.kv_str_array("strs", {"a", "", "ccc"});
  w.kv_array<float>("floats", testing::kF32, {1.5f, -2.0f});
  w.kv_array<int16_t>("i16s", testing::kI16, {-1, 7});
  w.kv_array<uint64_t>("u64s", testing::kU64, {3, 1ull << 63});
  w.kv_array<double>("f64s", testing::kF64, {1.0});
  w.kv_str_array("no_strs", {});
  auto bytes = w.build();
  auto r = GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufFile& f = *r.value();
  EXPECT_EQ(f.version(), GetParam());
  EXPECT_EQ(f.architecture(), "qwen2");
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_int("u64"), 1ll << 40);
  EXPECT_FALSE(f.get_int("u64max").has_value());  // does not fit int64
  EXPECT_EQ(f.type_of("u64max"), ValueType::uint64);
  EXPECT_EQ(f.get_int("i64"), -(1ll << 50));
  EXPECT_EQ(f.get_float("f32"), 0.5);
  EXPECT_EQ(f.get_float("f64"), -2.25);
  EXPECT_EQ(f.get_bool("yes"), true);
  EXPECT_EQ(f.get_bool("no"), false);
  EXPECT_EQ(f.get_int("yes"), 1);
  EXPECT_EQ(f.get_int("no"), 0);
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_float_array("floats"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(f.get_int_array("i16s"), (std::vector<int64_t>{-1, 7}));
  EXPECT_FALSE(f.get_int_array("u64s").has_value());  // 2^63 does not fit
  EXPECT_FALSE(f.get_float_array("f64s").has_value());  // float32 elements only
  EXPECT_EQ(f.get_string_array("no_strs"), std::vector<std::string>{});
  EXPECT_EQ(f.type_of("strs"), ValueType::array);
  EXPECT_EQ(f.keys().size(), 21u);
  EXPECT_TRUE(f.tensors().empty());
}

INSTANTIATE_TEST_SUITE_P(V2V3, GgufVersions, ::testing::Values(2u, 3u));

TEST(GgufFile, EveryTensorType) {
  struct Case { DType type; uint64_t ne0; };
  const Case cases[] = {{DType::f32, 8},   {DType::f16, 8},    {DType::bf16, 8},   {DType::q8_0, 64},
                        {DType::q4_0, 32}, {DType::q4_1, 96},  {DType::q5_0, 32},  {DType::q5_1, 64},
                        {DType::q4_k, 256}, {DType::q6_k, 512}, {DType::q8_1, 64},  {DType::q8_k, 256},
                        {DType::q2_k, 256}, {DType::q3_k, 512}, {DType::q5_k, 256}, {DType::iq4_nl, 96},
                        {DType::iq4_xs, 256}};
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  for (const Case& c : cases) {
    w.tensor(std::string(to_string(c.type)), static_cast<uint32_t>(c.type), {c.ne0, 3});
  }
  w.tensor("vec", 0, {5});
  w.tensor("cube", 1, {2, 3, 4, 5});
  auto bytes = w.build();
  auto r = GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const GgufFile& f = *r.value();
  ASSERT_EQ(f.tensors().size(), std::size(cases) + 2);
  uint64_t sum = 0;
  for (size_t i = 0; i < std::size(cases); ++i) {
    const WeightTensor& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.n_dims, 2);
    EXPECT_EQ(t.ne[0], static_cast<int64_t>(cases[i].ne0));
    EXPECT_EQ(t.ne[1], 3);
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(row_bytes(t.type, t.ne[0]) * 3));
    // data points at the bytes the writer put there.
    const auto* p = static_cast<const uint8_t*>(t.data);
    ASSERT_GE(p, bytes.data() + w.layout().data_start);
    ASSERT_LE(p + t.nbytes, bytes.data() + bytes.size());
    EXPECT_EQ(p[0], static_cast<uint8_t>(i * 31));
    EXPECT_EQ(p[t.nbytes - 1], static_cast<uint8_t>(i * 31 + t.nbytes - 1));
    sum += t.nbytes;
  }
  const WeightTensor* cube = f.tensor("cube");
  ASSERT_NE(cube, nullptr);
  EXPECT_EQ(cube->n_dims, 4);
  EXPECT_EQ(cube->rows(), 60);
  EXPECT_EQ(cube->nbytes, 240u);
  EXPECT_EQ(f.tensor("vec")->nbytes, 20u);
  EXPECT_EQ(f.tensor_data_bytes(), sum + 240 + 20);
}

// The reader accepts every type whose layout it knows, q8_k included: refusing what a
// platform cannot compute is Platform::verify_quantization's job, not the reader's.
TEST(GgufFile, AcceptsQ8KTensors) {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("blk.0.attn_q.weight", static_cast<uint32_t>(DType::q8_k), {512, 2});
  auto bytes = w.build();
  auto r = GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const WeightTensor* t = r.value()->tensor("blk.0.attn_q.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::q8_k);
  EXPECT_EQ(t->nbytes, 2u * 2u * 292u);  // 2 rows of 2 blocks of 292 bytes
}

TEST(GgufFile, CustomAlignment) {
  GgufWriter w;
  w.alignment = 64;
  w.kv_u32("general.alignment", 64);
  w.tensor("a", 0, {3});
  w.tensor("b", 0, {5});
  auto bytes = w.build();
  auto r = GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(static_cast<const uint8_t*>(r.value()->tensor("b")->data) - bytes.data(),
            static_cast<ptrdiff_t>(w.layout().data_start + 64));
}

TEST(GgufFile, FromMemoryDoesNotCopy) {
  GgufWriter w;
  w.tensor("t", 0, {4});
  auto bytes = w.build();
  auto r = GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()->tensor("t")->data, bytes.data() + w.layout().data_start);
  EXPECT_EQ(r.value()->file_size(), bytes.size());
}

}  // namespace
}  // namespace troupe::gguf
