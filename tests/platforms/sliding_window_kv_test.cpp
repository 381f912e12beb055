// Sliding-window KV freeing end to end: a model whose every layer is windowed (Mistral
// 7B v0.1's kind: `llama` with attention.sliding_window) through the engine core, the
// scheduler's KV cache manager and the real CPU worker. Releasing the blocks that fall out
// of every window changes no output (token for token and logprob for logprob against the
// same engine keeping every block: the window is applied in attention either way), holds
// far fewer blocks on long sequences, and a prefix-cache hit on blocks a request released
// (or, once evicted, the lack of one) gives what a cold run gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/in_process_executor.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/rank/runner/worker_runner.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/core_steps.hpp"

namespace troupe {
namespace {

constexpr int32_t kWindow = 24;  // keys; blocks are 16 tokens

struct Job {
  std::vector<int32_t> prompt;
  int max_tokens = 0;
};

struct RunResult {
  std::vector<engine::FinalOutput> outputs;  // in job order
  int64_t peak_blocks = 0;                   // most blocks in use after any step
  int64_t hit_tokens = 0;                    // prefix-cache hits, tokens
};

// A tiny llama (hidden 256, 2 layers) whose every layer is windowed to kWindow keys.
std::string write_windowed_model() {
  auto spec = dummy::make_dummy_spec("tiny", "f32", 11);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  spec->shape.sliding_window = kWindow;
  auto builder = dummy::dummy_gguf(*spec);
  EXPECT_TRUE(builder.ok()) << builder.status().to_string();
  const std::string path = "/tmp/troupe_sliding_window_kv_" + std::to_string(::getpid()) + ".gguf";
  EXPECT_TRUE(builder->write_file(path).ok());
  return path;
}

// An engine core over one in-process CPU rank. release: the KV cache manager is told the
// model's window (what the engine does); otherwise it keeps every block.
class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const std::string& path, bool release, int64_t num_blocks) {
    Platform* platform = testing::cpu_platform();
    if (!platform) return unavailable("no CPU platform plugin in the build tree");
    runtime::register_builtin_models();
    auto e = std::unique_ptr<Engine>(new Engine());
    EngineConfig config;
    config.model.model_path = path;
    config.parallel.num_threads = 2;
    config.cache.num_gpu_blocks_override = num_blocks;
    config.model.max_model_len = num_blocks * 16;
    auto artifacts = engine::load_model_artifacts(config);
    if (!artifacts) return artifacts.status();
    e->artifacts_ = std::move(artifacts).value();
    TROUPE_RETURN_IF_ERROR(platform->check_and_update_config(config));
    e->executor_ = std::make_unique<engine::InProcessExecutor>(*platform);
    auto loaded = e->executor_->run_on_all(engine::LoadModel{config});
    if (!loaded) return loaded.status();
    const ModelInfo& info = loaded->front().info;
    if (info.sliding_window != kWindow)
      return internal_error("the model reports window " + std::to_string(info.sliding_window));
    auto plan = engine::set_up_kv_cache(*e->executor_, config, info.context_length);
    if (!plan) return plan.status();
    e->num_blocks_ = plan->num_blocks;
    engine::EngineCoreConfig core;
    core.scheduler.max_num_batched_tokens = 64;  // chunked prefill: windows move inside a prompt too
    core.scheduler.max_num_seqs = 4;
    core.scheduler.max_model_len = plan->max_model_len;
    core.kv.num_blocks = static_cast<int32_t>(plan->num_blocks);
    core.kv.block_size = plan->spec.block_size;
    core.kv.enable_prefix_caching = true;
    core.kv.sliding_window = release ? info.sliding_window : 0;
    Engine* self = e.get();
    e->core_ = std::make_unique<engine::EngineCore>(core, e->artifacts_.tokenizer, [self](engine::EngineCoreOutputs out) {
      for (auto& o : out.outputs) engine::accumulate(self->outputs_[o.request_id], o);
      if (!out.has_stats) return;
      self->result_.peak_blocks = std::max<int64_t>(
          self->result_.peak_blocks, std::llround(out.stats.scheduler.kv_cache_usage * static_cast<double>(self->num_blocks_)));
      self->result_.hit_tokens += out.stats.scheduler.prefix_cache_hits;
    });
    return e;
  }

  RunResult run(const std::vector<Job>& jobs) {
    result_ = {};
    outputs_.clear();
    std::vector<std::string> ids;
    for (const Job& job : jobs) {
      engine::CoreRequest r;
      r.request_id = "r";
      r.request_id += std::to_string(next_++);  // (GCC 12's -Wrestrict misfires on "r" + std::string)
      ids.push_back(r.request_id);
      r.prompt_token_ids = job.prompt;
      r.sampling.temperature = 0;
      r.sampling.max_tokens = job.max_tokens;
      r.sampling.ignore_eos = true;
      r.sampling.logprobs = 3;
      Status s = core_->add_request(std::move(r));
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    testing::step_until_done(*core_, *executor_);
    for (const std::string& id : ids) result_.outputs.push_back(outputs_[id]);
    return result_;
  }

 private:
  Engine() = default;
  engine::ModelArtifacts artifacts_;
  std::unique_ptr<engine::InProcessExecutor> executor_;
  std::unique_ptr<engine::EngineCore> core_;
  std::map<std::string, engine::FinalOutput> outputs_;
  RunResult result_;
  int64_t num_blocks_ = 0;
  int64_t next_ = 0;
};

std::vector<int32_t> random_ids(int n, uint32_t seed) {
  std::vector<int32_t> ids;
  uint32_t x = seed;
  for (int i = 0; i < n; ++i) {
    x = 1103515245u * x + 12345u;
    ids.push_back(static_cast<int32_t>(300 + (x >> 8) % 200));
  }
  return ids;
}

void expect_same(const std::vector<engine::FinalOutput>& want, const std::vector<engine::FinalOutput>& got,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t j = 0; j < want.size(); ++j) {
    SCOPED_TRACE(what + ", job " + std::to_string(j));
    EXPECT_TRUE(got[j].finished);
    EXPECT_EQ(got[j].token_ids, want[j].token_ids);
    ASSERT_EQ(got[j].logprobs.size(), want[j].logprobs.size());
    for (size_t i = 0; i < want[j].logprobs.size(); ++i) {
      EXPECT_EQ(got[j].logprobs[i].token_id, want[j].logprobs[i].token_id) << "token " << i;
      EXPECT_FLOAT_EQ(got[j].logprobs[i].logprob, want[j].logprobs[i].logprob) << "token " << i;
      EXPECT_EQ(got[j].logprobs[i].top_ids, want[j].logprobs[i].top_ids) << "token " << i;
    }
  }
}

class SlidingWindowKv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::cpu_platform()) GTEST_SKIP() << "no CPU platform plugin in the build tree";
    path_ = write_windowed_model();
  }
  void TearDown() override {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string path_;
};

TEST_F(SlidingWindowKv, ReleasingBlocksOutOfTheWindowChangesNoOutputAndHoldsFewer) {
  const std::vector<Job> jobs = {{random_ids(100, 1), 160}, {random_ids(37, 2), 120}};
  auto keep = Engine::create(path_, /*release=*/false, 48);
  ASSERT_TRUE(keep.ok()) << keep.status().to_string();
  const RunResult all_blocks = (*keep)->run(jobs);
  auto release = Engine::create(path_, /*release=*/true, 48);
  ASSERT_TRUE(release.ok()) << release.status().to_string();
  const RunResult windowed = (*release)->run(jobs);
  expect_same(all_blocks.outputs, windowed.outputs, "blocks released vs kept");
  std::printf("[sliding-window kv] peak blocks in use: %lld kept, %lld released\n",
              static_cast<long long>(all_blocks.peak_blocks), static_cast<long long>(windowed.peak_blocks));
  // Kept: when B ends (157 tokens, 10 blocks) A holds about 222 tokens (14 blocks), and A
  // ends with 17. Released: a decoding request holds the blocks of its last 24 keys and of
  // the next token, at most 3; a 64-token prefill chunk spans at most 5 more.
  EXPECT_GE(all_blocks.peak_blocks, 20);
  EXPECT_LE(windowed.peak_blocks, 10);
}

// B's prompt is A's prompt and output and more: its prefix blocks are ones A released
// (still cached) or, with a small cache another request has meanwhile filled, evicted ones.
// Either way B's output is what a cold engine gives for B.
TEST_F(SlidingWindowKv, APrefixHitOnReleasedBlocksEqualsAColdRun) {
  for (const bool evict : {false, true}) {
    SCOPED_TRACE(evict ? "released blocks evicted before the hit" : "released blocks still cached");
    const int64_t blocks = evict ? 14 : 48;
    const Job a{random_ids(100, 3), 60};
    auto warm = Engine::create(path_, true, blocks);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    const RunResult ra = (*warm)->run({a});
    ASSERT_EQ(ra.outputs.size(), 1u);
    ASSERT_EQ(ra.outputs[0].token_ids.size(), 60u);
    Job b{a.prompt, 30};
    b.prompt.insert(b.prompt.end(), ra.outputs[0].token_ids.begin(), ra.outputs[0].token_ids.begin() + 44);
    b.prompt.push_back(301);  // 145 tokens: its first 9 blocks are A's
    if (evict) (void)(*warm)->run({{random_ids(150, 5), 20}});  // fills the small cache
    const RunResult rb = (*warm)->run({b});
    auto cold = Engine::create(path_, true, blocks);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    const RunResult want = (*cold)->run({b});
    EXPECT_EQ(want.hit_tokens, 0);
    expect_same(want.outputs, rb.outputs, "after a hit vs cold");
    std::printf("[sliding-window kv] %s: B hit %lld of 145 prompt tokens\n", evict ? "evicted" : "cached",
                static_cast<long long>(rb.hit_tokens));
    if (evict)
      EXPECT_LT(rb.hit_tokens, 144);
    else
      EXPECT_EQ(rb.hit_tokens, 144);  // every full block before the last token, released ones too
  }
}

}  // namespace
}  // namespace troupe
