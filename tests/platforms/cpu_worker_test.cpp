// The CPU worker end to end on stories260K: batched and chunked forwards equal
// each sequence run alone bit for bit (more of that in batch_invariance_test), bad batches and files give errors, KV sizing,
// and its ops, attention backend and communicator come from its Platform.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "runtime/config/engine_config.hpp"
#include "platforms/cpu/cpu_platform.hpp"  // CountingPlatform wraps it (troupe_platform_cpu_impl)
#include "platforms/cpu/cpu_worker.hpp"    // CpuWorker over a platform of the test's own
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/loaded_worker.hpp"
#include "tests/runtime/model_files/gguf/gguf_writer.hpp"
#include "troupe/worker.hpp"

namespace troupe {
namespace {

using testing::cpu_platform;

class CpuWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Platform* platform = cpu_platform();
    ASSERT_NE(platform, nullptr) << "the cpu platform plugin did not load from " << TROUPE_BINARY_DIR;
    runtime::register_builtin_models();
    EngineConfig config;
    config.parallel.num_threads = 2;
    config.scheduler.max_num_batched_tokens = 128;
    auto w = testing::load_worker(*platform, config, testing::stories_path(), kBlocks);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    w_ = std::move(*w);
    ASSERT_TRUE(w_.worker->compile_or_warm_up_model().ok());
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
    std::vector<testing::BatchPart> batch;
    for (const Part& p : parts)
      batch.push_back({p.seq * 8, p.ids.data(), static_cast<int>(p.ids.size()), p.start_pos, p.want_logits});
    return testing::run_step(w_, batch, kBs);
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

  testing::LoadedWorker w_;
};

TEST_F(CpuWorkerTest, ReportsModelAndSpec) {
  EXPECT_EQ(w_.vocab, 512);
  EXPECT_EQ(w_.worker->model_info()->num_layers, 5);
  auto spec = w_.worker->get_kv_cache_spec();
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
  EXPECT_EQ(max_diff(a[0], alone_prefill[0]), 0.0f);
  EXPECT_EQ(max_diff(a[1], alone_prefill[1]), 0.0f);
  // Step B: two decodes and the rest of the chunked prompt.
  auto b = run({{3, {next[0]}, lens[0], true},
                {5, std::vector<int32_t>(p2.begin() + 16, p2.end()), 16, true},
                {4, {next[1]}, lens[1], true}});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(max_diff(b[0], alone_decode[0]), 0.0f);
  EXPECT_EQ(max_diff(b[1], alone_prefill[2]), 0.0f);
  EXPECT_EQ(max_diff(b[2], alone_decode[1]), 0.0f);
  auto c = run({{5, {next[2]}, lens[2], true}});
  EXPECT_EQ(max_diff(c.at(0), alone_decode[2]), 0.0f);
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
  auto r = w_.worker->execute_model(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::out_of_range);

  b.slot_mapping = {0, 1};
  b.token_ids = {1, 100000};
  r = w_.worker->execute_model(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vocabulary"), std::string::npos) << r.status().message();

  b.token_ids = {1, 2};
  b.block_tables = {{}};
  EXPECT_FALSE(w_.worker->execute_model(req).ok());
  b.block_tables = {{0}};
  b.logits_indices = {5};
  EXPECT_FALSE(w_.worker->execute_model(req).ok());
  b.logits_indices = {1};
  b.query_start = {0, 1};
  EXPECT_FALSE(w_.worker->execute_model(req).ok());
  b.query_start = {0, 2};
  EXPECT_TRUE(w_.worker->execute_model(req).ok());
}

TEST_F(CpuWorkerTest, KvCacheSpaceFromEnvironment) {
  ::setenv("TROUPE_CPU_KVCACHE_SPACE", "0.5", 1);
  auto m = w_.worker->determine_available_memory();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, int64_t{1} << 29);
  ::setenv("TROUPE_CPU_KVCACHE_SPACE", "lots", 1);
  m = w_.worker->determine_available_memory();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("TROUPE_CPU_KVCACHE_SPACE"), std::string::npos);
  ::unsetenv("TROUPE_CPU_KVCACHE_SPACE");
  m = w_.worker->determine_available_memory();
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
  EXPECT_FALSE((*w)->compile_or_warm_up_model().ok());
}

TEST(CpuPlatformTest, CommunicatorOfOneRank) {
  Platform* platform = cpu_platform();
  ASSERT_NE(platform, nullptr);
  auto c = platform->make_device_communicator(ParallelConfig{}, 0);
  ASSERT_TRUE(c.ok());
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  EXPECT_TRUE((*c)->all_reduce(in, 4, DType::f32).ok());
  EXPECT_EQ(in[2], 3.0f);
  EXPECT_TRUE((*c)->all_gather(in, out, 4, DType::f32).ok());
  EXPECT_EQ(out[3], 4.0f);
  EXPECT_FALSE((*c)->send(in, 4, DType::f32, 1).ok());
  EXPECT_FALSE((*c)->broadcast(in, 4, DType::f32, 2).ok());
  ParallelConfig two;
  two.tensor_parallel_size = 2;  // and no communicator id
  auto refused = platform->make_device_communicator(two, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("make_communicator_id"), std::string::npos) << refused.status().message();
  EXPECT_FALSE(platform->make_device_communicator(ParallelConfig{}, 1).ok());
}

// The GGUF reader accepts every type whose layout it knows; the platform decides which it computes.
TEST(CpuPlatformTest, VerifyQuantizationNamesTypePlatformAndSupportedList) {
  Platform* platform = cpu_platform();
  ASSERT_NE(platform, nullptr);
  EXPECT_TRUE(platform->verify_quantization("q4_1").ok());
  EXPECT_TRUE(platform->verify_quantization("").ok());  // nothing to verify
  for (const char* refused : {"q8_k", "q8_1"}) {
    Status s = platform->verify_quantization(refused);
    ASSERT_FALSE(s.ok()) << refused;
    EXPECT_EQ(s.code(), StatusCode::not_supported);
    EXPECT_NE(s.message().find(refused), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("platform cpu"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("supported: f32, f16, q4_0, q4_1"), std::string::npos) << s.message();
  }
  EXPECT_EQ(platform->supported_quantizations(),
            (std::vector<std::string>{"f32", "f16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k",
                                      "q5_k", "q6_k", "iq4_nl", "iq4_xs", "bf16", "mxfp4"}));
}

// The platform's answer and its ops' answer agree on every type the reader accepts.
TEST(CpuPlatformTest, SupportedQuantizationsMatchWhatItsOpsCompute) {
  Platform* platform = cpu_platform();
  ASSERT_NE(platform, nullptr);
  EngineConfig config;
  ASSERT_TRUE(platform->check_and_update_config(config).ok());
  auto ops = platform->make_ops(config);
  ASSERT_TRUE(ops.ok());
  for (uint32_t id = 0; id < 256; ++id) {
    auto tr = dtype_traits(id);
    if (!tr) continue;
    SCOPED_TRACE(std::string(tr->name));
    const bool listed = platform->verify_quantization(tr->name).ok();
    Status computed = (*ops)->check_weight_type(static_cast<DType>(id));
    EXPECT_EQ(listed, computed.ok()) << computed.to_string();
    if (!computed.ok()) {
      EXPECT_EQ(computed.code(), StatusCode::not_supported);
      EXPECT_NE(computed.message().find(std::string(tr->name)), std::string::npos) << computed.message();
      EXPECT_NE(computed.message().find("platform cpu"), std::string::npos) << computed.message();
    }
  }
}

/// A one-layer llama (hidden 256, so q8_k's 256-element blocks fit) whose attn_q has type `q_type`.
std::vector<uint8_t> tiny_llama(DType q_type) {
  gguf::testing::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.embedding_length", 256);
  w.kv_u32("llama.block_count", 1);
  w.kv_u32("llama.attention.head_count", 2);
  w.kv_u32("llama.attention.head_count_kv", 2);
  w.kv_u32("llama.feed_forward_length", 256);
  w.kv_u32("llama.context_length", 64);
  const auto f32 = static_cast<uint32_t>(DType::f32);
  w.tensor("token_embd.weight", f32, {256, 8});
  w.tensor("output_norm.weight", f32, {256});
  w.tensor("blk.0.attn_norm.weight", f32, {256});
  w.tensor("blk.0.attn_q.weight", static_cast<uint32_t>(q_type), {256, 256});
  for (const char* m : {"attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    w.tensor(std::string("blk.0.") + m + ".weight", f32, {256, 256});
  w.tensor("blk.0.ffn_norm.weight", f32, {256});
  return w.build();
}

// Most of the file is f32 (so checking only its most common type passes), but one matrix
// is q8_k: the model loader asks the platform's ops and refuses it instead of crashing.
TEST(CpuPlatformTest, AWeightTheKernelsCannotComputeIsALoadErrorNotACrash) {
  Platform* platform = cpu_platform();
  ASSERT_NE(platform, nullptr);
  runtime::register_builtin_models();
  EngineConfig config;
  config.parallel.num_threads = 2;
  ASSERT_TRUE(platform->check_and_update_config(config).ok());
  for (DType q : {DType::f32, DType::q8_k}) {
    SCOPED_TRACE(std::string(to_string(q)));
    std::vector<uint8_t> bytes = tiny_llama(q);
    auto f = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
    ASSERT_TRUE(f.ok()) << f.status().to_string();  // the reader accepts q8_k
    gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
    auto w = platform->make_worker(config, 0);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->init_device().ok());
    Status s = (*w)->load_model(source);
    if (q == DType::f32) {
      EXPECT_TRUE(s.ok()) << s.to_string();  // the same file with an f32 attn_q loads
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::not_supported);
    EXPECT_NE(s.message().find("blk.0.attn_q.weight"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("q8_k"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("platform cpu"), std::string::npos) << s.message();
    EXPECT_EQ((*w)->compile_or_warm_up_model().code(), StatusCode::unavailable);
  }
}

// Ops and attention that count the calls the model makes through them, then do the CPU's work.
class CountingOps final : public Ops {
 public:
  explicit CountingOps(std::unique_ptr<Ops> inner) : inner_(std::move(inner)) {}
  Status check_weight_type(DType type) const override { return inner_->check_weight_type(type); }
  void matmul(const WeightTensor& w, const float* x, int64_t n, float* y) override {
    ++matmuls;
    inner_->matmul(w, x, n, y);
  }
  void embedding(const WeightTensor& w, const int32_t* ids, int64_t n, float* out) override {
    inner_->embedding(w, ids, n, out);
  }
  void rms_norm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out) override {
    inner_->rms_norm(x, w, n, dim, eps, out);
  }
  void rope(float* x, const int32_t* pos, int64_t n, int heads, int head_dim, float theta, bool neox) override {
    inner_->rope(x, pos, n, heads, head_dim, theta, neox);
  }
  void silu_mul(const float* g, const float* u, int64_t n, float* out) override { inner_->silu_mul(g, u, n, out); }
  void add_inplace(float* y, const float* x, int64_t n) override { inner_->add_inplace(y, x, n); }
  void layer_norm(const float* x, const float* w, const float* b, int64_t n, int64_t dim, float eps,
                  float* out) override {
    inner_->layer_norm(x, w, b, n, dim, eps, out);
  }
  void gelu(const float* x, int64_t n, float* out) override { inner_->gelu(x, n, out); }
  void add_bias(float* y, const float* b, int64_t n, int64_t dim) override { inner_->add_bias(y, b, n, dim); }
  void dense_attention(const float* q, const float* k, const float* v, float* out, const int32_t* starts, int seqs,
                       int heads, int head_dim, float scale, bool causal) override {
    inner_->dense_attention(q, k, v, out, starts, seqs, heads, head_dim, scale, causal);
  }
  int matmuls = 0;

 private:
  std::unique_ptr<Ops> inner_;
};

class CountingAttention final : public AttentionBackend {
 public:
  explicit CountingAttention(std::unique_ptr<AttentionBackend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "counting(" + inner_->name() + ")"; }
  Status allocate(const KvCacheSpec& spec, int64_t num_blocks) override {
    ++allocations;
    return inner_->allocate(spec, num_blocks);
  }
  const KvCacheSpec& spec() const override { return inner_->spec(); }
  int64_t num_blocks() const override { return inner_->num_blocks(); }
  Status check_batch(const ForwardBatch& batch) const override {
    ++checks;
    return inner_->check_batch(batch);
  }
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const ForwardBatch& batch, const AttentionParams& params) override {
    ++forwards;
    inner_->forward(layer, q, k, v, out, num_heads, batch, params);
  }
  int allocations = 0, forwards = 0;
  mutable int checks = 0;

 private:
  std::unique_ptr<AttentionBackend> inner_;
};

// A platform of the test's own around the CPU platform: counts the pieces its workers
// ask for, keeps pointers to them, and can refuse one. Its workers are real CpuWorkers.
class CountingPlatform final : public Platform {
 public:
  PlatformEnum platform_enum() const override { return PlatformEnum::out_of_tree; }
  std::string device_type() const override { return "counting"; }
  std::string device_name(int id = 0) const override { return cpu_.device_name(id); }
  Status check_and_update_config(ConfigEditor& config) const override { return cpu_.check_and_update_config(config); }
  Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const ConfigView& config) const override {
    ++attention_made;
    if (refuse == "attention") return not_supported("counting refuses the attention backend");
    auto inner = cpu_.make_attention_backend(config);
    if (!inner.ok()) return inner.status();
    auto a = std::make_unique<CountingAttention>(std::move(*inner));
    attention = a.get();
    return std::unique_ptr<AttentionBackend>(std::move(a));
  }
  Result<std::unique_ptr<Ops>> make_ops(const ConfigView& config) const override {
    ++ops_made;
    if (refuse == "ops") return not_supported("counting refuses ops");
    auto inner = cpu_.make_ops(config);
    if (!inner.ok()) return inner.status();
    auto o = std::make_unique<CountingOps>(std::move(*inner));
    ops = o.get();
    return std::unique_ptr<Ops>(std::move(o));
  }
  Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ConfigView& parallel,
                                                                       int rank) const override {
    ++communicators_made;
    last_world_size = ParallelSettings::from(parallel).world_size();
    if (refuse == "communicator") return not_supported("counting refuses the communicator");
    return cpu_.make_device_communicator(parallel, rank);
  }
  Result<std::unique_ptr<Worker>> make_worker(const ConfigView& config, int rank) const override {
    return std::unique_ptr<Worker>(new cpu::CpuWorker(config, rank, *this));
  }
  DeviceMemory memory_info(int id = 0) const override { return cpu_.memory_info(id); }
  std::vector<std::string> supported_quantizations() const override { return cpu_.supported_quantizations(); }

  std::string refuse;  // "ops", "attention" or "communicator": that factory fails
  mutable int ops_made = 0, attention_made = 0, communicators_made = 0, last_world_size = 0;
  mutable CountingOps* ops = nullptr;              // the last ones made (owned by the worker)
  mutable CountingAttention* attention = nullptr;

 private:
  cpu::CpuPlatform cpu_;
};

EngineConfig small_config(const Platform& platform) {
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.scheduler.max_num_batched_tokens = 64;
  EXPECT_TRUE(platform.check_and_update_config(config).ok());
  return config;
}

TEST(CpuWorkerPlatformTest, OpsAttentionAndCommunicatorComeFromThePlatform) {
  runtime::register_builtin_models();
  CountingPlatform platform;
  const EngineConfig config = small_config(platform);
  auto w = platform.make_worker(config, 0);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(platform.ops_made + platform.attention_made + platform.communicators_made, 0);  // nothing before init
  ASSERT_TRUE((*w)->init_device().ok());
  EXPECT_EQ(platform.ops_made, 1);
  EXPECT_EQ(platform.attention_made, 1);
  EXPECT_EQ(platform.communicators_made, 1);
  EXPECT_EQ(platform.last_world_size, config.parallel.world_size());
  ASSERT_NE(platform.ops, nullptr);
  ASSERT_NE(platform.attention, nullptr);

  auto f = gguf::GgufFile::open(testing::stories_path());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  Status s = (*w)->load_model(source);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE((*w)->initialize_cache(4).ok());
  EXPECT_EQ(platform.attention->allocations, 1);
  EXPECT_EQ(platform.attention->num_blocks(), 4);
  ASSERT_TRUE((*w)->compile_or_warm_up_model().ok());
  // The model ran on the platform's pieces: 7 matmuls per layer + the output head, one
  // attention per layer, and the worker checked the batch with the platform's backend.
  const int layers = (*w)->model_info()->num_layers;
  EXPECT_EQ(platform.ops->matmuls, 7 * layers + 1);
  EXPECT_EQ(platform.attention->forwards, layers);
  EXPECT_EQ(platform.attention->checks, 1);
  // Still one of each: the worker made nothing itself.
  EXPECT_EQ(platform.ops_made + platform.attention_made + platform.communicators_made, 3);

  // A slot past the 4 allocated blocks is refused by the backend's check_batch, not run.
  ExecuteModelRequest req;
  req.batch.token_ids = {1};
  req.batch.positions = {0};
  req.batch.slot_mapping = {4 * 16};
  req.batch.query_start = {0, 1};
  req.batch.seq_lens = {1};
  req.batch.block_tables = {{0}};
  req.batch.logits_indices = {0};
  auto r = (*w)->execute_model(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::out_of_range) << r.status().to_string();
  EXPECT_EQ(platform.attention->checks, 2);
  EXPECT_EQ(platform.attention->forwards, layers);
}

TEST(CpuWorkerPlatformTest, APieceThePlatformRefusesFailsInitDevice) {
  for (const std::string piece : {"ops", "attention", "communicator"}) {
    SCOPED_TRACE(piece);
    CountingPlatform platform;
    platform.refuse = piece;
    auto w = platform.make_worker(small_config(platform), 0);
    ASSERT_TRUE(w.ok());
    Status s = (*w)->init_device();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::not_supported);
    EXPECT_NE(s.message().find("counting refuses"), std::string::npos) << s.message();
    auto f = gguf::GgufFile::open(testing::stories_path());
    ASSERT_TRUE(f.ok());
    gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
    EXPECT_EQ((*w)->load_model(source).code(), StatusCode::unavailable);
  }
}

TEST(CpuWorkerPlatformTest, RankOutsideTheWorldIsRefused) {
  CountingPlatform platform;
  auto w = platform.make_worker(small_config(platform), 1);
  ASSERT_TRUE(w.ok());
  Status s = (*w)->init_device();
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
  EXPECT_EQ(platform.communicators_made, 0);
}

}  // namespace
}  // namespace troupe
