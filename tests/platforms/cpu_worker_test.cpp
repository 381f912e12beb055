// The CPU worker end to end on stories260K: batched and chunked forwards agree
// with each sequence run alone, bad batches and files give errors, KV sizing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "runtime/gguf/gguf_file.hpp"
#include "runtime/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "troupe/worker.hpp"

namespace troupe {
namespace {

using testing::cpu_platform;

class CpuWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    platform_ = cpu_platform();
    ASSERT_NE(platform_, nullptr) << "the cpu platform plugin did not load from " << TROUPE_BINARY_DIR;
    runtime::register_builtin_models();
    config_.parallel.num_threads = 2;
    config_.scheduler.max_num_batched_tokens = 128;
    ASSERT_TRUE(platform_->check_and_update_config(config_).ok());
    auto f = gguf::GgufFile::open(testing::stories_path());
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    source_ = std::make_unique<gguf::GgufModelSource>(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
    auto w = platform_->make_worker(config_, 0);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    worker_ = std::move(*w);
    ASSERT_TRUE(worker_->init_device().ok());
    Status s = worker_->load_model(*source_);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(worker_->initialize_cache(kBlocks).ok());
    ASSERT_TRUE(worker_->compile_or_warm_up_model().ok());
    vocab_ = worker_->model_info()->vocab_size;
  }

  static constexpr int kBlocks = 64;
  static constexpr int kBs = 16;

  // Sequence `s` owns blocks [8 s, 8 s + 8).
  struct Part {
    int seq;
    std::vector<int32_t> ids;
    int start_pos;
    bool want_logits;
  };
  std::vector<std::vector<float>> run(const std::vector<Part>& parts) {
    ExecuteModelRequest req;
    auto& b = req.batch;
    b.query_start.push_back(0);
    for (const auto& p : parts) {
      for (size_t i = 0; i < p.ids.size(); ++i) {
        const int pos = p.start_pos + static_cast<int>(i);
        b.token_ids.push_back(p.ids[i]);
        b.positions.push_back(pos);
        b.slot_mapping.push_back(int64_t{p.seq * 8 + pos / kBs} * kBs + pos % kBs);
      }
      b.query_start.push_back(b.num_tokens());
      const int len = p.start_pos + static_cast<int>(p.ids.size());
      b.seq_lens.push_back(len);
      std::vector<int32_t> table;
      for (int i = 0; i < (len + kBs - 1) / kBs; ++i) table.push_back(p.seq * 8 + i);
      b.block_tables.push_back(table);
      if (p.want_logits) b.logits_indices.push_back(b.num_tokens() - 1);
    }
    auto out = worker_->execute_model(req);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    std::vector<std::vector<float>> rows;
    if (!out.ok()) return rows;
    for (size_t r = 0; r < b.logits_indices.size(); ++r)
      rows.emplace_back(out->logits.begin() + r * vocab_, out->logits.begin() + (r + 1) * vocab_);
    return rows;
  }

  static std::vector<int32_t> prompt(int seq, int len) {
    std::vector<int32_t> ids{1};
    for (int i = 1; i < len; ++i) ids.push_back(3 + (i * 37 + seq * 101) % 500);
    return ids;
  }

  static float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
    return d;
  }

  Platform* platform_ = nullptr;
  EngineConfig config_;
  std::unique_ptr<gguf::GgufModelSource> source_;
  std::unique_ptr<Worker> worker_;
  int64_t vocab_ = 0;
};

TEST_F(CpuWorkerTest, ReportsModelAndSpec) {
  EXPECT_EQ(vocab_, 512);
  EXPECT_EQ(worker_->model_info()->num_layers, 5);
  auto spec = worker_->get_kv_cache_spec();
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->block_size, 16);
  EXPECT_EQ(spec->num_kv_heads, 4);
  EXPECT_EQ(spec->head_dim, 8);
}

TEST_F(CpuWorkerTest, MixedBatchesMatchSequencesAlone) {
  const int lens[3] = {5, 23, 40};
  const int32_t next[3] = {300, 301, 302};
  std::vector<float> alone_prefill[3], alone_decode[3];
  for (int s = 0; s < 3; ++s) {
    alone_prefill[s] = run({{s, prompt(s, lens[s]), 0, true}}).at(0);
    alone_decode[s] = run({{s, {next[s]}, lens[s], true}}).at(0);
  }
  // Step A: two whole prompts and the first chunk of the third (sequences 3..5 use fresh blocks).
  std::vector<int32_t> p2 = prompt(2, lens[2]);
  auto a = run({{3, prompt(0, lens[0]), 0, true},
                {4, prompt(1, lens[1]), 0, true},
                {5, std::vector<int32_t>(p2.begin(), p2.begin() + 16), 0, false}});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_LT(max_diff(a[0], alone_prefill[0]), 1e-4f);
  EXPECT_LT(max_diff(a[1], alone_prefill[1]), 1e-4f);
  // Step B: two decodes and the rest of the chunked prompt.
  auto b = run({{3, {next[0]}, lens[0], true},
                {5, std::vector<int32_t>(p2.begin() + 16, p2.end()), 16, true},
                {4, {next[1]}, lens[1], true}});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_LT(max_diff(b[0], alone_decode[0]), 1e-4f);
  EXPECT_LT(max_diff(b[1], alone_prefill[2]), 1e-4f);
  EXPECT_LT(max_diff(b[2], alone_decode[1]), 1e-4f);
  auto c = run({{5, {next[2]}, lens[2], true}});
  EXPECT_LT(max_diff(c.at(0), alone_decode[2]), 1e-4f);
}

TEST_F(CpuWorkerTest, BadBatchesAreErrorsNotCrashes) {
  ExecuteModelRequest req;
  auto& b = req.batch;
  b.token_ids = {1, 2};
  b.positions = {0, 1};
  b.slot_mapping = {0, int64_t{kBlocks} * kBs};  // one past the cache
  b.query_start = {0, 2};
  b.seq_lens = {2};
  b.block_tables = {{0}};
  b.logits_indices = {1};
  auto r = worker_->execute_model(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::out_of_range);

  b.slot_mapping = {0, 1};
  b.token_ids = {1, 100000};
  r = worker_->execute_model(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vocabulary"), std::string::npos) << r.status().message();

  b.token_ids = {1, 2};
  b.block_tables = {{}};
  EXPECT_FALSE(worker_->execute_model(req).ok());
  b.block_tables = {{0}};
  b.logits_indices = {5};
  EXPECT_FALSE(worker_->execute_model(req).ok());
  b.logits_indices = {1};
  b.query_start = {0, 1};
  EXPECT_FALSE(worker_->execute_model(req).ok());
  b.query_start = {0, 2};
  EXPECT_TRUE(worker_->execute_model(req).ok());
}

TEST_F(CpuWorkerTest, KvCacheSpaceFromEnvironment) {
  ::setenv("TROUPE_CPU_KVCACHE_SPACE", "0.5", 1);
  auto m = worker_->determine_available_memory();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, int64_t{1} << 29);
  ::setenv("TROUPE_CPU_KVCACHE_SPACE", "lots", 1);
  m = worker_->determine_available_memory();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("TROUPE_CPU_KVCACHE_SPACE"), std::string::npos);
  ::unsetenv("TROUPE_CPU_KVCACHE_SPACE");
  m = worker_->determine_available_memory();
  ASSERT_TRUE(m.ok());
  EXPECT_GT(*m, 0);
  EXPECT_LE(*m, int64_t{1} << 30);
}

TEST(CpuPlatformTest, ModelWithWrongHyperparametersIsRefused) {
  Platform* platform = cpu_platform();
  ASSERT_NE(platform, nullptr);
  runtime::register_builtin_models();
  std::vector<char> bytes = testing::stories_with_wrong_hparams();
  ASSERT_FALSE(bytes.empty());
  auto f = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  EngineConfig config;
  ASSERT_TRUE(platform->check_and_update_config(config).ok());
  auto w = platform->make_worker(config, 0);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->init_device().ok());
  Status s = (*w)->load_model(source);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("blk.0.ffn_gate.weight"), std::string::npos) << s.message();
  EXPECT_FALSE((*w)->execute_dummy_batch().ok());
}

TEST(CpuPlatformTest, CommunicatorOfOneRank) {
  Platform* platform = cpu_platform();
  ASSERT_NE(platform, nullptr);
  auto c = platform->make_device_communicator(0, 1);
  ASSERT_TRUE(c.ok());
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  EXPECT_TRUE((*c)->all_reduce(in, 4, DType::f32).ok());
  EXPECT_EQ(in[2], 3.0f);
  EXPECT_TRUE((*c)->all_gather(in, out, 4, DType::f32).ok());
  EXPECT_EQ(out[3], 4.0f);
  EXPECT_FALSE((*c)->send(in, 4, DType::f32, 1).ok());
  EXPECT_FALSE((*c)->broadcast(in, 4, DType::f32, 2).ok());
  EXPECT_FALSE(platform->make_device_communicator(0, 2).ok());
}

}  // namespace
}  // namespace troupe
