// The host-side decisions of the CUDA worker, checked without a GPU (label unit):
// every batch it builds for itself (the warm-up prefill and decodes, the batch a
// decode graph is captured with, the replay-vs-eager validation batch, and the
// SDK's dummy batch) passes the SDK's AttentionBackend::check_batch for many cache
// geometries and configs, and runs through a real ModelRunnerWorker (the CPU
// platform's, on stories260K); the graph inputs' mirror uploads only what changed
// and leaves the device image equal to the step's; the replay-vs-eager tolerance;
// the memory kept back from the KV budget; when tokens are chosen on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "kernels/cuda/sampling.hpp"
#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_batches.hpp"
#include "platforms/cuda/cuda_graph_inputs.hpp"
#include "platforms/cuda/cuda_graph_runner.hpp"
#include "platforms/cuda/cuda_ops.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "troupe/model_runner/model_runner_worker.hpp"

namespace troupe::cuda {
namespace {

// The SDK's check for a cache of `blocks` blocks, and what cuda_paged adds, without memory.
class GeometryOnly final : public AttentionBackend {
 public:
  GeometryOnly(int64_t blocks, int block_size) : blocks_(blocks) {
    spec_.block_size = block_size;
    spec_.num_layers = 1;
    spec_.num_kv_heads = 1;
    spec_.head_dim = 8;
    spec_.dtype = DType::f16;
  }
  std::string name() const override { return "geometry"; }
  Status allocate(const KvCacheSpec&, int64_t) override { return not_supported("geometry only"); }
  const KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return blocks_; }
  Status check_batch(const ForwardBatch& b) const override {
    TROUPE_RETURN_IF_ERROR(AttentionBackend::check_batch(b));
    return check_cuda_batch_shape(b);
  }
  void forward(int, const float*, const float*, const float*, float*, int, const ForwardBatch&,
               const AttentionParams&) override {}

 private:
  KvCacheSpec spec_;
  int64_t blocks_;
};

struct Named {
  std::string what;
  ForwardBatch batch;
};

// Every batch the CUDA worker makes for itself with this config and cache (and the SDK's
// dummy batch, which the worker runs for a pooling model).
std::vector<Named> self_made_batches(const EngineConfig& config, int64_t context, const BatchGeometry& g) {
  std::vector<Named> all;
  all.push_back({"SDK dummy batch", ModelRunnerWorker::dummy_batch(g.block_size, config.scheduler.max_num_batched_tokens)});
  all.push_back({"warm-up prefill", warm_up_prefill_batch(config.scheduler.max_num_batched_tokens, g,
                                                          config.scheduler.max_num_seqs)});
  all.push_back({"warm-up decode of 1", warm_up_decode_batch(1, g)});
  const DecodeGraphShape shape = decode_graph_shape(RunnerSettings::from(config), context, g);
  for (int size : shape.sizes) all.push_back({"graph capture of " + std::to_string(size), warm_up_decode_batch(size, g, false)});
  if (!shape.sizes.empty()) {
    const int max = shape.sizes.back();
    all.push_back({"largest decode warm-up", warm_up_decode_batch(max, g)});
    all.push_back({"validation of 3", graph_validation_batch(std::min(3, max), g)});
    all.push_back({"validation of the largest", graph_validation_batch(max, g)});
  }
  return all;
}

TEST(CudaSelfMadeBatches, PassTheSdkCheckForEveryGeometry) {
  int checked = 0;
  for (int64_t blocks : {1, 2, 3, 40, 5000})
    for (int block_size : {1, 16, 32})
      for (auto [seqs, tokens] : {std::pair<int, int64_t>{256, 2048}, {16, 128}, {3, 8}, {1, 1}, {512, 100}})
        for (int64_t context : {0, 100, 131072}) {
          EngineConfig config;
          config.scheduler.max_num_seqs = seqs;
          config.scheduler.max_num_batched_tokens = tokens;
          const BatchGeometry g{512, blocks, block_size};
          const GeometryOnly cache(blocks, block_size);
          const DecodeGraphShape shape = decode_graph_shape(RunnerSettings::from(config), context, g);
          ASSERT_FALSE(shape.sizes.empty());
          EXPECT_LE(shape.sizes.back(), std::min<int64_t>(seqs, tokens));
          EXPECT_GE(shape.width, 1u);
          for (const Named& n : self_made_batches(config, context, g)) {
            SCOPED_TRACE(n.what + ": " + std::to_string(blocks) + " blocks of " + std::to_string(block_size) +
                         ", max_num_seqs " + std::to_string(seqs) + ", max_num_batched_tokens " +
                         std::to_string(tokens));
            ASSERT_GT(n.batch.num_seqs(), 0);
            EXPECT_LE(n.batch.num_tokens(), tokens);  // the model's activations are sized for that
            EXPECT_LE(n.batch.logits_indices.size(), static_cast<size_t>(std::max(seqs, 1)));  // the logits buffer's rows
            EXPECT_GE(n.batch.logits_indices.size(), 1u);
            const Status s = cache.check_batch(n.batch);
            EXPECT_TRUE(s.ok()) << s.to_string();
            for (int32_t id : n.batch.token_ids) EXPECT_TRUE(id >= 0 && id < g.vocab);
            ++checked;
          }
          // The decode batches are ones the graphs take: the validation one must be.
          const int max = shape.sizes.back();
          EXPECT_TRUE(CudaGraphRunner::eligible(graph_validation_batch(max, g), max, shape.width));
          EXPECT_TRUE(CudaGraphRunner::eligible(warm_up_decode_batch(max, g, false), max, shape.width));
        }
  EXPECT_GT(checked, 1000);
}

// The same batches through a real ModelRunnerWorker (the CPU platform's): execute_model
// checks each against its cache and runs the model on it.
TEST(CudaSelfMadeBatches, RunThroughAModelRunnerWorker) {
  Platform* cpu = troupe::testing::cpu_platform();
  ASSERT_NE(cpu, nullptr);
  runtime::register_builtin_models();
  auto f = gguf::GgufFile::open(troupe::testing::stories_path());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.scheduler.max_num_seqs = 40;
  config.scheduler.max_num_batched_tokens = 96;
  ASSERT_TRUE(cpu->check_and_update_config(config).ok());
  auto w = cpu->make_worker(config, 0);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  Worker& worker = **w;
  ASSERT_TRUE(worker.init_device().ok());
  ASSERT_TRUE(worker.load_model(source).ok());
  // As many blocks as the largest decode has rows (with fewer, rows share a slot: fine on a
  // GPU, where warm-up output is thrown away, but a data race in the CPU worker's threads).
  constexpr int64_t kBlocks = 40;
  ASSERT_TRUE(worker.initialize_cache(kBlocks).ok());
  const ModelInfo& info = *worker.model_info();
  const BatchGeometry g{info.vocab_size, kBlocks, config.cache.block_size};
  for (const Named& n : self_made_batches(config, info.context_length, g)) {
    SCOPED_TRACE(n.what);
    ExecuteModelRequest req;
    req.batch = n.batch;
    auto out = worker.execute_model(req);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(static_cast<int64_t>(out->logits.size()), static_cast<int64_t>(n.batch.logits_indices.size()) * info.vocab_size);
  }
}

// The device image as the graphs read it after the steps so far: `mem` holds the mirror's
// bytes; check the rows of a step padded to `size`.
void expect_image_is_step(const GraphInputMirror& m, const std::vector<uint8_t>& mem, const ForwardBatch& b, int size) {
  const GraphInputsLayout& l = m.layout();
  const auto i32 = [&](size_t off, int i) {
    int32_t v;
    std::memcpy(&v, mem.data() + off + static_cast<size_t>(i) * 4, 4);
    return v;
  };
  const int S = b.num_seqs();
  const size_t tables = l.image + l.attention.block_tables;
  for (int s = 0; s < size; ++s) {
    SCOPED_TRACE(s);
    int64_t slot;
    std::memcpy(&slot, mem.data() + l.image + static_cast<size_t>(s) * 8, 8);
    EXPECT_EQ(i32(l.ids, s), s < S ? b.token_ids[s] : 0);
    EXPECT_EQ(i32(l.positions, s), s < S ? b.positions[s] : 0);
    EXPECT_EQ(slot, s < S ? b.slot_mapping[s] : -1);
    EXPECT_EQ(i32(l.image + l.attention.seq_lens, s), s < S ? b.seq_lens[s] : 1);
    EXPECT_EQ(i32(l.image + l.attention.query_start, s), s);
    for (size_t j = 0; j < m.width(); ++j) {
      const int32_t want = s < S && j < b.block_tables[s].size() ? b.block_tables[s][j] : -1;
      ASSERT_EQ(i32(tables + static_cast<size_t>(s) * m.width() * 4, static_cast<int>(j)), want) << "entry " << j;
    }
  }
  EXPECT_EQ(i32(l.image + l.attention.query_start, size), size);
}

TEST(CudaGraphInputs, OnlyWhatChangedIsCopiedAndTheImageIsTheStep) {
  constexpr int kRows = 64;
  constexpr size_t kWidth = 512;  // an 8k context of 16-token blocks
  constexpr int kBlock = 16;
  GraphInputMirror mirror(kRows, kWidth);
  std::vector<uint8_t> host(mirror.layout().bytes), device(host.size(), 0xcd);
  mirror.reset(host.data());
  device = host;  // the runner's first copy is the whole image
  // Sequences of different lengths decoding together; some finish and others join.
  struct Seq {
    int len;
    int first_block;
  };
  std::vector<Seq> seqs;
  for (int i = 0; i < 40; ++i) seqs.push_back({100 + 37 * i, 1000 * i});
  size_t copied = 0, steps = 0;
  const std::vector<int> sizes = CudaGraphRunner::capture_sizes(kRows);
  for (int step = 0; step < 60; ++step) {
    if (step == 20) seqs.resize(25);                // some finished
    if (step == 40) seqs.insert(seqs.begin(), {5, 99999});  // one joined in front: every row moves
    ForwardBatch b;
    b.query_start.push_back(0);
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& q = seqs[i];
      const int pos = q.len;
      ++q.len;
      b.token_ids.push_back(7 + static_cast<int32_t>(i));
      b.positions.push_back(pos);
      std::vector<int32_t> table;
      for (int k = 0; k <= pos / kBlock; ++k) table.push_back(q.first_block + k);
      b.slot_mapping.push_back(int64_t{table.back()} * kBlock + pos % kBlock);
      b.seq_lens.push_back(q.len);
      b.block_tables.push_back(table);
      b.query_start.push_back(static_cast<int32_t>(i + 1));
      b.logits_indices.push_back(static_cast<int32_t>(i));
    }
    const int size = *std::lower_bound(sizes.begin(), sizes.end(), b.num_seqs());
    const auto ranges = mirror.update(host.data(), b, size);
    EXPECT_LE(ranges.size(), GraphInputMirror::kMaxRanges);
    for (size_t r = 0; r < ranges.size(); ++r) {
      ASSERT_LT(ranges[r].begin, ranges[r].end);
      ASSERT_LE(ranges[r].end, host.size());
      if (r > 0) {
        ASSERT_GT(ranges[r].begin, ranges[r - 1].end);
      }
      std::memcpy(device.data() + ranges[r].begin, host.data() + ranges[r].begin, ranges[r].end - ranges[r].begin);
      if (step != 20 && step != 40) copied += ranges[r].end - ranges[r].begin;
    }
    if (step != 20 && step != 40) ++steps;
    SCOPED_TRACE(step);
    expect_image_is_step(mirror, device, b, size);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // A plain decode step changes ids, positions, slots and lengths (and a table entry now and
  // then): a few hundred bytes, not the 40 x 512 x 4 = 80 KiB of tables.
  const size_t full = static_cast<size_t>(40) * kWidth * sizeof(int32_t);
  EXPECT_LT(copied / steps, full / 20) << "bytes copied per decode step";
}

TEST(CudaReplayCheck, ATolerancePassesNearTiesAndCatchesRealDifferences) {
  const int64_t vocab = 4;
  // A near tie whose argmax flips between the runs: within the tolerance.
  std::vector<float> want = {10.0f, 10.00001f, -3.0f, 0.5f, 1, 2, 3, 4};
  std::vector<float> got = {10.00002f, 10.0f, -3.0f, 0.5f, 1, 2, 3, 4};
  EXPECT_TRUE(compare_logits(want, got, 2, vocab, 1e-3f).within);
  got[6] = 3.1f;  // row 1 off by 0.1 of a largest logit 4
  const ReplayDifference d = compare_logits(want, got, 2, vocab, 1e-3f);
  EXPECT_FALSE(d.within);
  EXPECT_EQ(d.row, 1);
  EXPECT_NEAR(d.worst, 0.1f, 1e-5f);
  got[6] = NAN;
  EXPECT_FALSE(compare_logits(want, got, 2, vocab, 1e-3f).within);
  EXPECT_FALSE(compare_logits(want, std::vector<float>(3), 2, vocab, 1e-3f).within);
}

TEST(CudaMemoryBudget, LaterAllocationsAreKeptFromTheKvCache) {
  EngineConfig config;  // 256 sequences, 2048 tokens
  ModelInfo info;
  info.vocab_size = 128256;
  info.hidden_size = 2048;
  info.context_length = 131072;
  const LaterAllocations eager = later_allocations(RunnerSettings::from(config), info, false);
  const LaterAllocations graphs = later_allocations(RunnerSettings::from(config), info, true);
  EXPECT_EQ(eager.graphs, 0);
  EXPECT_EQ(eager.logits, int64_t{256} * info.vocab_size * 4);
  EXPECT_GE(eager.sampling, 2 * int64_t{256} * info.vocab_size * 8);  // the sort keys, twice
  EXPECT_EQ(eager.cublas, int64_t{2048} * 4 * 2048 * 2 + (int64_t{32} << 20));
  EXPECT_GT(graphs.graphs, 3 * int64_t{256} * info.vocab_size * 4);  // logits and validation copies
  EXPECT_GT(graphs.total(), eager.total());
  EXPECT_GT(graphs.total(), int64_t{1} << 30);  // the ~1 GiB the KV cache must not take
  // A step too large for the device sampler keeps no workspace: it samples on the host.
  config.scheduler.max_num_seqs = 20000;
  EXPECT_EQ(later_allocations(RunnerSettings::from(config), info, false).sampling, 0);
}

TEST(CudaTokenSelection, OversizeStepsAndTinyTemperatures) {
  std::vector<TokenSelection> rows(300);
  for (auto& r : rows) r.temperature = 0.7f;
  const int64_t big_vocab = int64_t{1} << 23;  // 300 x 8 Mi > INT_MAX
  EXPECT_TRUE(selects_on_device(rows.data(), 300, 128256));
  EXPECT_FALSE(selects_on_device(rows.data(), 300, big_vocab));  // host sampling instead of failing
  for (auto& r : rows) r.temperature = 1e-39f;  // 1/T overflows: greedy, argmax takes any size
  EXPECT_TRUE(all_greedy(rows.data(), 300));
  EXPECT_TRUE(selects_on_device(rows.data(), 300, big_vocab));
  rows[5].temperature = 1e-30f;
  EXPECT_FALSE(all_greedy(rows.data(), 300));
  EXPECT_TRUE(kernels::cuda::sampling_fits(1, INT_MAX));
  EXPECT_FALSE(kernels::cuda::sampling_fits(2, INT_MAX));
  EXPECT_FALSE(kernels::cuda::sampling_fits(0, 10));
}

TEST(CudaStaging, OneStepFitsTheRing) {
  // 2048 tokens, 256 sequences of 128k context (8192 blocks of 16): the tables dominate.
  const int64_t bytes = staging_bytes_per_step(2048, 256, 8192);
  EXPECT_GE(bytes, int64_t{256} * 8192 * 4 + 2048 * 16);
  EXPECT_LT(bytes, int64_t{9} << 20);
}

}  // namespace
}  // namespace troupe::cuda
