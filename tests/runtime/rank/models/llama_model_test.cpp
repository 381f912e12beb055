// Llama hyperparameters and weight validation on real GGUF files (stories260K,
// and copies of it that are truncated or disagree with their own metadata).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/model_files/source/quantizing_source.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/rank/models/llama_hparams.hpp"
#include "runtime/rank/models/llama_model.hpp"
#include "runtime/rank/models/llama_shard.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/attention.hpp"
#include "troupe/model_registry.hpp"
#include "troupe/ops.hpp"

namespace troupe::models {
namespace {

const std::string kStories = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Overwrite the u32 value of metadata key `key` (which must currently be `from`).
bool patch_u32(std::vector<char>& d, const std::string& key, uint32_t from, uint32_t to) {
  auto it = std::search(d.begin(), d.end(), key.begin(), key.end());
  if (it == d.end()) return false;
  const size_t at = static_cast<size_t>(it - d.begin()) + key.size() + 4;
  uint32_t v;
  std::memcpy(&v, d.data() + at, 4);
  if (v != from) return false;
  std::memcpy(d.data() + at, &to, 4);
  return true;
}

TEST(LlamaHParamsTest, ReadsStories260K) {
  auto f = gguf::GgufFile::open(kStories);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  gguf::GgufModelSource src(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  auto hp = read_llama_hparams(src);
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->arch, "llama");
  EXPECT_EQ(hp->n_embd, 64);
  EXPECT_EQ(hp->n_layer, 5);
  EXPECT_EQ(hp->n_head, 8);
  EXPECT_EQ(hp->n_head_kv, 4);
  EXPECT_EQ(hp->head_dim, 8);
  EXPECT_EQ(hp->n_ff, 172);
  EXPECT_EQ(hp->n_vocab, 512);
  EXPECT_FALSE(hp->rope_neox);
  auto w = bind_llama_weights(src, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->layers.size(), 5u);
  EXPECT_GT(w->bytes_per_token, 0u);
}

TEST(LlamaHParamsTest, TensorShapeDisagreeingWithMetadataIsInvalidArgument) {
  auto bytes = read_bytes(kStories);
  ASSERT_TRUE(patch_u32(bytes, "llama.feed_forward_length", 172, 160));
  auto f = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource src(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  auto hp = read_llama_hparams(src);
  ASSERT_TRUE(hp.ok());
  auto w = bind_llama_weights(src, *hp);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(w.status().message().find("blk.0.ffn_gate.weight"), std::string::npos) << w.status().message();
}

TEST(LlamaHParamsTest, InconsistentHeadCountsAreRefused) {
  auto bytes = read_bytes(kStories);
  ASSERT_TRUE(patch_u32(bytes, "llama.attention.head_count_kv", 4, 3));
  auto f = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource src(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  auto hp = read_llama_hparams(src);
  ASSERT_FALSE(hp.ok());
  EXPECT_NE(hp.status().message().find("head_count_kv"), std::string::npos);
}

TEST(LlamaHParamsTest, TruncatedFileIsDataLoss) {
  auto bytes = read_bytes(kStories);
  bytes.resize(bytes.size() - 1000);
  auto f = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::data_loss);
}

TEST(LlamaModelTest, RegistryAndMissingPlatformServices) {
  runtime::register_builtin_models();
  runtime::register_builtin_models();  // idempotent
  EXPECT_TRUE(model_registry::is_registered("llama"));
  EXPECT_TRUE(model_registry::is_registered("LlamaForCausalLM"));
  auto f = gguf::GgufFile::open(kStories);
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource src(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  auto m = model_registry::create("llama", src, ModelContext{});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::invalid_argument);
}

// Ops that compute nothing and refuse one weight type; the loader must ask them before
// it keeps a weight, so a type the platform cannot run never reaches matmul().
class RefusingOps final : public Ops {
 public:
  explicit RefusingOps(DType refused) : refused_(refused) {}
  Status check_weight_type(DType type) const override {
    if (type != refused_) return {};
    return not_supported("weights of type " + std::string(to_string(type)) + " cannot be computed by platform fake");
  }
  void matmul(const WeightTensor&, const float*, int64_t, float*) override { ADD_FAILURE() << "matmul called"; }
  void embedding(const WeightTensor&, const int32_t*, int64_t, float*) override { ADD_FAILURE() << "embedding"; }
  void rms_norm(const float*, const float*, int64_t, int64_t, float, float*) override {}
  void rope(float*, const int32_t*, int64_t, int, int, float, bool) override {}
  void silu_mul(const float*, const float*, int64_t, float*) override {}
  void add_inplace(float*, const float*, int64_t) override {}
  void layer_norm(const float*, const float*, const float*, int64_t, int64_t, float, float*) override {}
  void gelu(const float*, int64_t, float*) override {}
  void add_bias(float*, const float*, int64_t, int64_t) override {}
  void dense_attention(const float*, const float*, const float*, float*, const int32_t*, int, int, int, float,
                       bool) override {}

 private:
  DType refused_;
};

class NoAttention final : public AttentionBackend {
 public:
  std::string name() const override { return "none"; }
  Status allocate(const KvCacheSpec&, int64_t) override { return not_supported("no cache"); }
  const KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return 0; }
  void forward(int, const float*, const float*, const float*, float*, int, const ForwardBatch&,
               const AttentionParams&) override {}

 private:
  KvCacheSpec spec_;
};

TEST(LlamaModelTest, WeightTypesTheOpsCannotComputeAreRefusedAtLoad) {
  auto f = gguf::GgufFile::open(kStories);
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource src(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  const DType stored = src.tensor("blk.0.attn_q.weight")->type;
  NoAttention attention;
  RefusingOps refuses_other(DType::q8_k);
  auto host = make_host_allocator();
  ModelContext ok_ctx{&refuses_other, &attention, host.get(), 16};
  auto m = LlamaModel::create(src, ok_ctx);
  EXPECT_TRUE(m.ok()) << m.status().to_string();

  RefusingOps refuses_stored(stored);
  ModelContext ctx{&refuses_stored, &attention, host.get(), 16};
  m = LlamaModel::create(src, ctx);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::not_supported);
  EXPECT_NE(m.status().message().find("model tensor '"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("platform fake"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(std::string(to_string(stored))), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace troupe::models

// ---------------------------------------------------------------------------------------
// Tensor and pipeline parallel shares

namespace troupe::models {
namespace {

TEST(LlamaShardTest, EvenSplitGivesTheRemainderToTheFirstParts) {
  EXPECT_EQ(even_split(172, 0, 4), (std::pair<int64_t, int64_t>{0, 43}));
  EXPECT_EQ(even_split(172, 3, 4), (std::pair<int64_t, int64_t>{129, 172}));
  EXPECT_EQ(even_split(5, 0, 2), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(even_split(5, 1, 2), (std::pair<int64_t, int64_t>{3, 5}));
  EXPECT_EQ(even_split(512, 2, 3), (std::pair<int64_t, int64_t>{342, 512}));
}

TEST(LlamaShardTest, SplitsThatDoNotDivideAreRefusedWithVllmsWording) {
  LlamaHParams hp;
  hp.n_head = 9;
  hp.n_head_kv = 3;
  hp.n_layer = 5;
  hp.n_vocab = 100;
  EXPECT_TRUE(check_llama_parallel(hp, 3, 5).ok());
  EXPECT_EQ(check_llama_parallel(hp, 2, 1).message(),
            "Total number of attention heads (9) must be divisible by tensor parallel size (2).");
  EXPECT_EQ(check_llama_parallel(hp, 9, 1).message(),
            "Total number of key-value heads (3) must be divisible by tensor parallel size (9).");
  EXPECT_EQ(check_llama_parallel(hp, 1, 8).message(),
            "Number of layers (5) must be at least the pipeline parallel size (8).");
  EXPECT_EQ(check_llama_parallel(hp, 1, 8).code(), StatusCode::invalid_argument);
}

TEST(LlamaShardTest, StoriesSplitOverTwoByTwoRanksIsViewsIntoTheFile) {
  auto f = gguf::GgufFile::open(kStories);
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource src(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  auto hp = read_llama_hparams(src);
  ASSERT_TRUE(hp.ok());
  auto w = bind_llama_weights(src, *hp);
  ASSERT_TRUE(w.ok());
  // The whole model when there is one rank: the tensors themselves.
  auto one = shard_llama_weights(*hp, *w, 0, 1, 0, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->layers.size(), 5u);
  EXPECT_EQ(one->layers[0].wo.data, w->layers[0].wo->data);
  EXPECT_EQ(one->layers[0].wo.row_stride, 0);
  EXPECT_EQ(one->token_embd.nbytes, w->token_embd->nbytes);
  // Tensor rank 1 of stage 1 (global rank 3).
  auto s = shard_llama_weights(*hp, *w, 1, 2, 1, 2);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->layer_begin, 3);  // stage 0 holds layers 0-2
  EXPECT_EQ(s->layer_end, 5);
  EXPECT_EQ(s->n_head_local, 4);
  EXPECT_EQ(s->n_head_kv_local, 2);
  EXPECT_EQ(s->ff_begin, 86);
  EXPECT_EQ(s->ff_end, 172);
  EXPECT_EQ(s->vocab_begin, 256);
  EXPECT_EQ(s->vocab_end, 512);
  EXPECT_EQ(s->token_embd.data, nullptr);  // only stage 0 embeds
  const auto base = [](const WeightTensor* t) { return static_cast<const uint8_t*>(t->data); };
  const LlamaShardLayer& L = s->layers[0];
  const LlamaLayerWeights& W3 = w->layers[3];
  EXPECT_EQ(static_cast<const uint8_t*>(L.wq.data), base(W3.wq) + 32 * 64 * 4);  // rows of heads 4-7
  EXPECT_EQ(L.wq.ne[1], 32);
  EXPECT_EQ(static_cast<const uint8_t*>(L.wk.data), base(W3.wk) + 16 * 64 * 4);
  EXPECT_EQ(static_cast<const uint8_t*>(L.wo.data), base(W3.wo) + 32 * 4);        // columns 32-63
  EXPECT_EQ(L.wo.ne[0], 32);
  EXPECT_EQ(L.wo.row_stride, 64 * 4);
  EXPECT_EQ(static_cast<const uint8_t*>(L.ffn_down.data), base(W3.ffn_down) + 86 * 4);
  EXPECT_EQ(L.ffn_down.row_stride, 172 * 4);
  EXPECT_EQ(static_cast<const uint8_t*>(s->output.data), base(w->output) + 256 * 64 * 4);
  EXPECT_EQ(s->output.ne[1], 256);
}

// A weight format with a header per row (a per-channel scale, as --quantization
// int8_channel) splits by rows but never by columns: the slice would lose the header.
TEST(LlamaShardTest, RowHeaderFormatsAreNotSplitByColumns) {
  WeightFormat f;
  f.name = "shard_test_rows";
  f.block_elems = 1;
  f.block_bytes = 1;
  f.row_header_bytes = 4;
  f.dequantize_row = +[](const void*, int64_t n, float* out) { std::fill(out, out + n, 0.0f); };
  f.quantize_row = +[](const float*, int64_t n, void* row) { std::memset(row, 0, static_cast<size_t>(4 + n)); };
  auto id = weight_formats::register_format(f);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  auto file = gguf::GgufFile::open(kStories);
  ASSERT_TRUE(file.ok());
  auto src = engine::quantize_at_load(
      std::make_unique<gguf::GgufModelSource>(std::shared_ptr<const gguf::GgufFile>(std::move(*file))),
      *weight_formats::find(*id));
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  auto hp = read_llama_hparams(**src);
  ASSERT_TRUE(hp.ok());
  auto w = bind_llama_weights(**src, *hp);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->layers[0].wo->type, *id);
  EXPECT_TRUE(shard_llama_weights(*hp, *w, 0, 1, 0, 1).ok());  // one rank: no slices
  EXPECT_TRUE(shard_llama_weights(*hp, *w, 0, 1, 1, 2).ok());  // pipeline stages take whole tensors
  auto split = shard_llama_weights(*hp, *w, 1, 2, 0, 1);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), StatusCode::not_supported);
  EXPECT_NE(split.status().message().find("its format shard_test_rows keeps a header per row"), std::string::npos)
      << split.status().message();
}

// A column slice must be whole blocks: 3 heads of 64 are 192 columns, not a multiple of
// q4_k's 256-element blocks.
TEST(LlamaShardTest, AColumnSliceInsideAQuantBlockNamesTheTensorAndTheBlock) {
  static uint8_t bytes[1 << 16] = {};
  auto tensor = [](const char* name, DType type, int64_t in, int64_t out) {
    WeightTensor t;
    t.name = name;
    t.type = type;
    t.n_dims = 2;
    t.ne[0] = in;
    t.ne[1] = out;
    t.data = bytes;
    t.nbytes = static_cast<uint64_t>(row_bytes(type, in) * out);
    return t;
  };
  LlamaHParams hp;
  hp.n_embd = 256;
  hp.n_layer = 1;
  hp.n_head = 6;
  hp.n_head_kv = 2;
  hp.head_dim = 64;
  hp.n_ff = 512;
  hp.n_vocab = 8;
  const WeightTensor emb = tensor("token_embd.weight", DType::f32, 256, 8), norm = tensor("n", DType::f32, 256, 1);
  const WeightTensor q = tensor("blk.0.attn_q.weight", DType::q4_k, 256, 384);
  const WeightTensor kv = tensor("blk.0.attn_k.weight", DType::q4_k, 256, 128);
  const WeightTensor o = tensor("blk.0.attn_output.weight", DType::q4_k, 384, 256);
  const WeightTensor up = tensor("blk.0.ffn_up.weight", DType::q4_k, 256, 512);
  const WeightTensor down = tensor("blk.0.ffn_down.weight", DType::q4_k, 512, 256);
  LlamaWeights w;
  w.token_embd = w.output = &emb;
  w.output_norm = &norm;
  w.layers.push_back({&norm, &q, &kv, &kv, &o, &norm, &up, &up, &down});
  EXPECT_TRUE(shard_llama_weights(hp, w, 0, 1, 0, 1).ok());
  auto s = shard_llama_weights(hp, w, 1, 2, 0, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(s.status().message(),
            "model tensor 'blk.0.attn_output.weight' cannot be split over tensor parallel size 2: rank 1 would read "
            "columns [192, 384) of its q4_k rows, which are blocks of 256 elements");
}

}  // namespace
}  // namespace troupe::models
