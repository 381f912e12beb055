// CUDA graphs of decode steps and token selection on the device, on a
// CudaPlatform of this process (so the worker's own type is reachable): a
// worker that replays graphs computes what an --enforce-eager worker computes,
// over decode batches that fill a captured size and ones that are padded, and
// the tokens chosen on the device (greedy and seeded top_p) are the ones the
// host sampler's rule picks from the same logits, and graphs survive sleep and wake-up.
// Label gpu: skips without one.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "kernels/cpu/token_select.hpp"
#include "platforms/cuda/cuda_platform.hpp"
#include "platforms/cuda/cuda_worker.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/cuda/cuda_test_device.hpp"

namespace troupe::cuda {
namespace {

constexpr int kBlockSize = 16;

std::unique_ptr<Worker> start(const Platform& platform, const ModelSource& source, EngineConfig config) {
  config.scheduler.max_num_batched_tokens = 128;
  config.scheduler.max_num_seqs = 16;
  EXPECT_TRUE(platform.check_and_update_config(config).ok());
  auto w = platform.make_worker(config, 0);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return nullptr;
  for (Status s : {(*w)->init_device(), (*w)->load_model(source), (*w)->initialize_cache(40),
                   (*w)->compile_or_warm_up_model()}) {
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return nullptr;
  }
  return std::move(*w);
}

// n sequences, sequence i in blocks 2i and 2i+1: a prefill of 3 tokens, then decodes.
struct Sequences {
  int n;
  std::vector<std::vector<int32_t>> tokens;
  explicit Sequences(int count) : n(count) {
    for (int i = 0; i < n; ++i) tokens.push_back({1, 10 + i, 20 + 2 * i});
  }
  // The next step: the whole prompt at first, then each sequence's last token.
  ExecuteModelRequest step(bool prefill) const {
    ExecuteModelRequest req;
    auto& b = req.batch;
    b.query_start.push_back(0);
    for (int i = 0; i < n; ++i) {
      const auto& t = tokens[static_cast<size_t>(i)];
      const int len = static_cast<int>(t.size());
      for (int p = prefill ? 0 : len - 1; p < len; ++p) {
        b.token_ids.push_back(t[static_cast<size_t>(p)]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t{2 * i + p / kBlockSize} * kBlockSize + p % kBlockSize);
      }
      b.query_start.push_back(b.num_tokens());
      b.seq_lens.push_back(len);
      b.block_tables.push_back({2 * i, 2 * i + 1});
      b.logits_indices.push_back(b.num_tokens() - 1);
    }
    return req;
  }
};

class CudaGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TROUPE_SKIP_WITHOUT_GPU();
    int count = 0;
    ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
    platform_ = std::make_unique<CudaPlatform>(count);
    runtime::register_builtin_models();
    auto f = gguf::GgufFile::open(troupe::testing::stories_path());
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    source_ = std::make_unique<gguf::GgufModelSource>(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  }
  /// A worker with CUDA graphs (graphed_, also as g_) and an eager one on the same model.
  void start_pair() {
    EngineConfig eager_config;
    eager_config.compilation.enforce_eager = true;
    graphed_ = start(*platform_, *source_, EngineConfig());
    eager_ = start(*platform_, *source_, eager_config);
    ASSERT_TRUE(graphed_ && eager_);
    g_ = dynamic_cast<CudaWorker*>(graphed_.get());
    ASSERT_NE(g_, nullptr);
  }

  /// One step of `seqs` on both workers: every logit within 1e-3, then each sequence
  /// takes the eager step's argmax.
  void step_both(Sequences& seqs, bool prefill) {
    const int64_t vocab = graphed_->model_info()->vocab_size;
    const ExecuteModelRequest req = seqs.step(prefill);
    auto want = eager_->execute_model(req);
    auto got = graphed_->execute_model(req);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().to_string() << got.status().to_string();
    ASSERT_EQ(got->logits.size(), want->logits.size());
    double worst = 0;
    for (size_t j = 0; j < want->logits.size(); ++j)
      worst = std::max(worst, std::fabs(double{got->logits[j]} - want->logits[j]));
    EXPECT_LT(worst, 1e-3);
    for (int i = 0; i < seqs.n; ++i) {
      const float* row = want->logits.data() + int64_t{i} * vocab;
      seqs.tokens[static_cast<size_t>(i)].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    }
  }

  std::unique_ptr<CudaPlatform> platform_;
  std::unique_ptr<gguf::GgufModelSource> source_;
  std::unique_ptr<Worker> graphed_, eager_;
  CudaWorker* g_ = nullptr;
};

TEST_F(CudaGraphTest, ReplaysComputeWhatTheEagerWorkerComputes) {
  ASSERT_NO_FATAL_FAILURE(start_pair());
  EXPECT_EQ(g_->cuda_graphs(), 5);  // 1, 2, 4, 8, 16
  EXPECT_EQ(dynamic_cast<CudaWorker*>(eager_.get())->cuda_graphs(), 0);
  for (int n : {1, 3, 8, 11, 16}) {
    SCOPED_TRACE(n);
    Sequences seqs(n);
    for (int step = 0; step < 4; ++step) {
      SCOPED_TRACE(step);
      ASSERT_NO_FATAL_FAILURE(step_both(seqs, step == 0));
    }
  }
  EXPECT_EQ(g_->cuda_graphs(), 5);  // nothing forced a recapture or turned them off
}

// Sleep frees the weights and the KV cache under the captured graphs; waking up (here from
// another thread, whose current device the worker must not rely on) builds them again, and
// the graphs are captured again on their next use and still compute what eager steps compute.
TEST_F(CudaGraphTest, AfterSleepAndWakeUpOnAnotherThreadReplaysStillMatchEagerSteps) {
  ASSERT_NO_FATAL_FAILURE(start_pair());
  auto* g = g_;
  ASSERT_EQ(g->cuda_graphs(), 5);
  Status slept, woken;
  std::thread([&] {
    slept = g->sleep(1);
    woken = g->wake_up({});
  }).join();
  ASSERT_TRUE(slept.ok()) << slept.to_string();
  ASSERT_TRUE(woken.ok()) << woken.to_string();
  Sequences seqs(5);  // padded to the graph of 8
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    ASSERT_NO_FATAL_FAILURE(step_both(seqs, step == 0));
  }
  EXPECT_GE(g->cuda_graphs(), 1);  // captured again, not turned off
}

TEST_F(CudaGraphTest, TokensChosenOnTheDeviceFollowTheSelectionRule) {
  auto worker = start(*platform_, *source_, EngineConfig());
  ASSERT_TRUE(worker);
  const int64_t vocab = worker->model_info()->vocab_size;
  Sequences seqs(6);
  ExecuteModelRequest req = seqs.step(true);
  auto logits = worker->execute_model(req);  // the logits of this step, copied out
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  ASSERT_TRUE(logits->sampled_token_ids.empty());
  // The same step again (it writes the same KV), now choosing on the device.
  for (int i = 0; i < 6; ++i) {
    TokenSelection t;
    if (i % 2 == 1) {
      t.temperature = 0.8f;
      t.top_p = 0.9f;
      t.top_k = i == 3 ? 5 : 0;
      t.u = 0.1 + 0.15 * i;
    }
    req.token_selection.push_back(t);
  }
  auto chosen = worker->execute_model(req);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  ASSERT_EQ(chosen->sampled_token_ids.size(), 6u);
  EXPECT_TRUE(chosen->logits.empty());
  std::vector<float> probs;
  std::vector<int32_t> order;
  for (int i = 0; i < 6; ++i) {
    const TokenSelection& t = req.token_selection[static_cast<size_t>(i)];
    const int32_t want = kernels::cpu::select_token(logits->logits.data() + int64_t{i} * vocab, vocab, t.temperature,
                                                    t.top_p, t.min_p, t.top_k, t.u, probs, order);
    EXPECT_EQ(chosen->sampled_token_ids[static_cast<size_t>(i)], want) << "row " << i;
  }
}

}  // namespace
}  // namespace troupe::cuda
