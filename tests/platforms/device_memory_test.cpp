// Device memory through the SDK: the host allocator, DeviceWeights placement
// (packed copies of strided views, a tied tensor copied once), and a real model
// on the SDK's ModelRunnerWorker over memory that is not the host's: weights
// placed by copy, logits copied out. Its logits equal the CPU platform's bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "runtime/config/engine_config.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model_runner/model_runner_worker.hpp"

namespace troupe {
namespace {

// Memory that claims not to be the host's: the model must place its weights by copy and
// the worker must copy logits out. Every copy is counted by kind.
class StagingAllocator final : public DeviceAllocator {
 public:
  std::string name() const override { return "staging"; }
  bool host_addressable() const override { return false; }
  Result<std::unique_ptr<DeviceBuffer>> allocate(int64_t bytes) override {
    if (bytes > limit) return resource_exhausted("staging memory is full");
    return inner_->allocate(bytes);
  }
  Status copy(void* dst, const void* src, int64_t bytes, CopyKind kind) override {
    ++copies[kind];
    return inner_->copy(dst, src, bytes, kind);
  }
  int64_t allocated_bytes() const override { return inner_->allocated_bytes(); }

  std::map<CopyKind, int> copies;
  int64_t limit = int64_t{1} << 40;

 private:
  std::unique_ptr<DeviceAllocator> inner_ = make_host_allocator();
};

TEST(DeviceMemory, HostAllocatorCopiesFillsAndCounts) {
  auto host = make_host_allocator();
  EXPECT_TRUE(host->host_addressable());
  EXPECT_EQ(host->allocate(0).status().code(), StatusCode::invalid_argument);
  DeviceArray<float> a, b;
  ASSERT_TRUE(a.allocate(*host, 12).ok());
  ASSERT_TRUE(b.allocate(*host, 12).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  EXPECT_GE(host->allocated_bytes(), 96);
  for (int i = 0; i < 12; ++i) a.data()[i] = static_cast<float>(i);
  ASSERT_TRUE(host->fill_zero(b.data(), 12 * sizeof(float)).ok());
  // Columns 1..2 of a 4x3 matrix into a packed 4x2 one.
  ASSERT_TRUE(host->copy_2d(b.data(), 2 * sizeof(float), a.data() + 1, 3 * sizeof(float), 2 * sizeof(float), 4,
                            CopyKind::device_to_device)
                  .ok());
  const float want[8] = {1, 2, 4, 5, 7, 8, 10, 11};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.data()[i], want[i]) << i;
  EXPECT_EQ(b.data()[8], 0.0f);
  EXPECT_EQ(host->copy_2d(b.data(), 4, a.data(), 8, 8, 1, CopyKind::device_to_device).code(),
            StatusCode::invalid_argument);
  ASSERT_TRUE(a.reserve(*host, 6).ok());  // no smaller allocation: keeps the buffer
  EXPECT_EQ(a.size(), 12);
}

TEST(DeviceMemory, WeightsArePackedCopiesAndATiedTensorIsCopiedOnce) {
  StagingAllocator mem;
  DeviceWeights weights(mem);
  float matrix[4][3] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}};
  WeightTensor column;  // columns [1, 3) of every row: a strided view, as a tensor-parallel slice
  column.name = "w";
  column.type = DType::f32;
  column.n_dims = 2;
  column.ne[0] = 2;
  column.ne[1] = 4;
  column.data = &matrix[0][1];
  column.row_stride = 3 * sizeof(float);
  column.nbytes = 3 * sizeof(float) * 3 + 2 * sizeof(float);
  auto placed = weights.place(column);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_NE(placed->data, column.data);
  EXPECT_EQ(placed->row_stride, 0);
  EXPECT_EQ(placed->nbytes, 8 * sizeof(float));
  float back[8];
  ASSERT_TRUE(mem.copy(back, placed->data, sizeof back, CopyKind::device_to_host).ok());
  const float want[8] = {1, 2, 4, 5, 7, 8, 10, 11};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], want[i]) << i;
  auto again = weights.place(column);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data, placed->data);
  EXPECT_EQ(weights.device_bytes(), static_cast<int64_t>(8 * sizeof(float)));

  mem.limit = 0;  // a full device is an error naming the weight, not a crash
  WeightTensor other = column;
  other.data = &matrix[0][0];
  auto full = weights.place(other);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(full.status().message().find("weight 'w' on staging"), std::string::npos) << full.status().message();
}

// The CPU platform's kernels over staging memory, with the SDK's worker.
class StagedPlatform final : public Platform {
 public:
  explicit StagedPlatform(Platform& cpu) : cpu_(cpu) {}
  PlatformEnum platform_enum() const override { return PlatformEnum::out_of_tree; }
  std::string device_type() const override { return "staged"; }
  std::string device_name(int id = 0) const override { return cpu_.device_name(id); }
  Status check_and_update_config(ConfigEditor& config) const override { return cpu_.check_and_update_config(config); }
  Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const ConfigView& c) const override {
    return cpu_.make_attention_backend(c);
  }
  Result<std::unique_ptr<Ops>> make_ops(const ConfigView& c) const override { return cpu_.make_ops(c); }
  Result<std::unique_ptr<DeviceAllocator>> make_allocator(const ConfigView&) const override {
    auto a = std::make_unique<StagingAllocator>();
    allocator = a.get();
    return std::unique_ptr<DeviceAllocator>(std::move(a));
  }
  Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ConfigView& p, int r) const override {
    return cpu_.make_device_communicator(p, r);
  }
  Result<std::unique_ptr<Worker>> make_worker(const ConfigView& config, int rank) const override {
    return std::unique_ptr<Worker>(new ModelRunnerWorker(config, rank, *this));
  }
  DeviceMemory memory_info(int id = 0) const override { return cpu_.memory_info(id); }
  std::vector<std::string> supported_quantizations() const override { return cpu_.supported_quantizations(); }

  mutable StagingAllocator* allocator = nullptr;  // the last one made (owned by the worker)

 private:
  Platform& cpu_;
};

std::unique_ptr<Worker> start(const Platform& platform, const ModelSource& source) {
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.scheduler.max_num_batched_tokens = 64;
  EXPECT_TRUE(platform.check_and_update_config(config).ok());
  auto w = platform.make_worker(config, 0);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return nullptr;
  EXPECT_TRUE((*w)->init_device().ok());
  Status s = (*w)->load_model(source);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE((*w)->initialize_cache(8).ok());
  EXPECT_TRUE((*w)->compile_or_warm_up_model().ok());
  return std::move(*w);
}

// Two sequences prefilled together, then decoded greedily together for a few steps.
std::vector<std::vector<float>> run_steps(Worker& w, int64_t vocab) {
  std::vector<std::vector<float>> all;
  std::vector<std::vector<int32_t>> seqs = {{1, 45, 67, 89, 12}, {1, 300, 7}};
  std::vector<int> done(2, 0);
  for (int step = 0; step < 4; ++step) {
    ExecuteModelRequest req;
    auto& b = req.batch;
    b.query_start.push_back(0);
    for (int s = 0; s < 2; ++s) {
      for (int p = done[s]; p < static_cast<int>(seqs[s].size()); ++p) {
        b.token_ids.push_back(seqs[s][p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t{s * 4} * 16 + p);
      }
      b.query_start.push_back(b.num_tokens());
      b.seq_lens.push_back(static_cast<int32_t>(seqs[s].size()));
      b.block_tables.push_back({s * 4});
      b.logits_indices.push_back(b.num_tokens() - 1);
    }
    auto out = w.execute_model(req);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return all;
    all.push_back(out->logits);
    for (int s = 0; s < 2; ++s) {
      done[s] = static_cast<int>(seqs[s].size());
      const float* row = out->logits.data() + s * vocab;
      seqs[s].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    }
  }
  return all;
}

TEST(DeviceMemory, AModelOnMemoryThatIsNotTheHostsGivesTheCpuLogitsBitForBit) {
  Platform* cpu = testing::cpu_platform();
  ASSERT_NE(cpu, nullptr);
  runtime::register_builtin_models();
  auto f = gguf::GgufFile::open(testing::stories_path());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));

  auto reference = start(*cpu, source);
  StagedPlatform staged(*cpu);
  auto worker = start(staged, source);
  ASSERT_TRUE(reference && worker);
  ASSERT_NE(staged.allocator, nullptr);
  // Every weight was copied in: more device memory than the file's tensors take.
  const ModelInfo& info = *worker->model_info();
  EXPECT_GT(staged.allocator->allocated_bytes(), static_cast<int64_t>(info.weight_bytes));
  EXPECT_GT(staged.allocator->copies[CopyKind::host_to_device], info.num_layers * 9);
  const int copied_out = staged.allocator->copies[CopyKind::device_to_host];

  const auto want = run_steps(*reference, info.vocab_size);
  const auto got = run_steps(*worker, info.vocab_size);
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0) << "step " << i;
  }
  EXPECT_EQ(staged.allocator->copies[CopyKind::device_to_host], copied_out + 4);  // one copy of logits a step
}

}  // namespace
}  // namespace troupe
