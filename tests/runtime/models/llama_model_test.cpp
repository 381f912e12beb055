// Llama hyperparameters and weight validation on real GGUF files (stories260K,
// and copies of it that are truncated or disagree with their own metadata).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "runtime/gguf/gguf_file.hpp"
#include "runtime/models/builtin_models.hpp"
#include "runtime/models/llama_hparams.hpp"
#include "runtime/models/llama_model.hpp"
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

 private:
  DType refused_;
};

class NoAttention final : public AttentionBackend {
 public:
  std::string name() const override { return "none"; }
  Status allocate(const KvCacheSpec&, int64_t) override { return not_supported("no cache"); }
  const KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return 0; }
  void forward(int, const float*, const float*, const float*, float*, int, const ForwardBatch&, float) override {}

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
  ModelContext ok_ctx{&refuses_other, &attention, 16};
  auto m = LlamaModel::create(src, ok_ctx);
  EXPECT_TRUE(m.ok()) << m.status().to_string();

  RefusingOps refuses_stored(stored);
  ModelContext ctx{&refuses_stored, &attention, 16};
  m = LlamaModel::create(src, ctx);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::not_supported);
  EXPECT_NE(m.status().message().find("model tensor '"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("platform fake"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(std::string(to_string(stored))), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace troupe::models
