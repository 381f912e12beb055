// The CUDA worker end to end, on the cuda platform plugin as the plugin host
// loads it: stories260K's logits against the CPU worker's over prefill and
// decode steps, the stories260K goldens (greedy, token for token with llama.cpp
// up to each case's fragile step), SmolLM2 through `troupe generate --device
// cuda` (TROUPE_TEST_MODEL), the memory budget (less what the worker allocates
// after the KV cache: cuda_batches' later_allocations), and a refused bad batch.
// Label gpu: every test skips with the device probe's reason without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "platforms/cuda/cuda_batches.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/golden/golden_cases.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/cuda/cuda_test_device.hpp"
#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

// The build tree's plugins, with cuda activated explicitly (nullptr without a GPU).
Platform* cuda_platform(std::string* why) {
  static plugin_host::PluginHost host([] {
    plugin_host::HostOptions o;
    o.plugin_dirs = {std::string(TROUPE_BINARY_DIR) + "/lib/troupe/plugins"};
    o.builtin_dirs = o.plugin_dirs;
    return o;
  }());
  host.load_all();
  plugin_host::PlatformRequest request;
  request.device = "cuda";
  auto p = host.activate_platform(request);
  if (!p.ok()) {
    *why = p.status().to_string();
    return nullptr;
  }
  return *p;
}


std::unique_ptr<Worker> start(const Platform& platform, const ModelSource& source, EngineConfig config) {
  config.scheduler.max_num_batched_tokens = 128;
  EXPECT_TRUE(platform.check_and_update_config(config).ok());
  auto w = platform.make_worker(config, 0);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return nullptr;
  Status s = (*w)->init_device();
  EXPECT_TRUE(s.ok()) << s.to_string();
  s = (*w)->load_model(source);
  EXPECT_TRUE(s.ok()) << s.to_string();
  s = (*w)->initialize_cache(32);
  EXPECT_TRUE(s.ok()) << s.to_string();
  s = (*w)->compile_or_warm_up_model();
  EXPECT_TRUE(s.ok()) << s.to_string();
  return s.ok() ? std::move(*w) : nullptr;
}

// Two sequences prefilled together (one in two chunks), then decoded greedily together.
std::vector<std::vector<float>> run_steps(Worker& w, int64_t vocab, std::vector<std::vector<int32_t>> seqs) {
  std::vector<std::vector<float>> all;
  std::vector<int> done(seqs.size(), 0);
  for (int step = 0; step < 6; ++step) {
    ExecuteModelRequest req;
    auto& b = req.batch;
    b.query_start.push_back(0);
    for (size_t s = 0; s < seqs.size(); ++s) {
      // Sequence 0's prompt arrives in two chunks (chunked prefill), the others whole.
      const int until = (s == 0 && step == 0) ? 3 : static_cast<int>(seqs[s].size());
      for (int p = done[s]; p < until; ++p) {
        b.token_ids.push_back(seqs[s][p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t{static_cast<int>(s) * 4} * 16 + p);
      }
      b.query_start.push_back(b.num_tokens());
      b.seq_lens.push_back(until);
      b.block_tables.push_back({static_cast<int32_t>(s) * 4, static_cast<int32_t>(s) * 4 + 1});
      b.logits_indices.push_back(b.num_tokens() - 1);
      done[s] = until;
    }
    auto out = w.execute_model(req);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return all;
    all.push_back(out->logits);
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (done[s] < static_cast<int>(seqs[s].size())) continue;  // still prefilling
      const float* row = out->logits.data() + s * vocab;
      seqs[s].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    }
  }
  return all;
}

class CudaWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TROUPE_SKIP_WITHOUT_GPU();
    std::string why;
    platform_ = cuda_platform(&why);
    ASSERT_NE(platform_, nullptr) << "a GPU is present, but the cuda platform did not activate: " << why;
    runtime::register_builtin_models();
  }
  Platform* platform_ = nullptr;
};

TEST_F(CudaWorkerTest, Stories260KLogitsFollowTheCpuWorker) {
  Platform* cpu = testing::cpu_platform();
  ASSERT_NE(cpu, nullptr);
  auto f = gguf::GgufFile::open(testing::stories_path());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  EngineConfig cpu_config;
  cpu_config.parallel.num_threads = 2;
  auto reference = start(*cpu, source, cpu_config);
  auto worker = start(*platform_, source, EngineConfig());
  ASSERT_TRUE(reference && worker);
  EXPECT_EQ(worker->platform_name(), "cuda");
  const int64_t vocab = worker->model_info()->vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {{1, 45, 67, 89, 12, 7}, {1, 300, 7}};
  const auto want = run_steps(*reference, vocab, seqs);
  const auto got = run_steps(*worker, vocab, seqs);
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(got.size(), want.size());
  // The CPU quantizes activations for its integer dot products; the GPU keeps them in f32:
  // the logits agree closely, not bit for bit.
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t j = 0; j < want[i].size(); ++j) worst = std::max(worst, std::fabs(double{got[i][j]} - want[i][j]));
  }
  std::printf("stories260K: largest logit difference cuda vs cpu over 6 steps: %.3g\n", worst);
  EXPECT_LT(worst, 0.05);
}

TEST_F(CudaWorkerTest, BadBatchesAreErrorsAndTheWorkerGoesOn) {
  auto f = gguf::GgufFile::open(testing::stories_path());
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  auto worker = start(*platform_, source, EngineConfig());
  ASSERT_TRUE(worker);
  ExecuteModelRequest req;
  req.batch.token_ids = {1};
  req.batch.positions = {0};
  req.batch.slot_mapping = {32 * 16};  // one past the cache
  req.batch.query_start = {0, 1};
  req.batch.seq_lens = {1};
  req.batch.block_tables = {{0}};
  req.batch.logits_indices = {0};
  EXPECT_EQ(worker->execute_model(req).status().code(), StatusCode::out_of_range);
  req.batch.slot_mapping = {0};
  req.batch.token_ids = {1 << 20};  // outside the vocabulary
  EXPECT_EQ(worker->execute_model(req).status().code(), StatusCode::out_of_range);
  req.batch.token_ids = {1};
  auto ok = worker->execute_model(req);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(static_cast<int64_t>(ok->logits.size()), worker->model_info()->vocab_size);
}

TEST_F(CudaWorkerTest, MemoryBudgetIsTheUtilizationShareLessWhatIsInUse) {
  auto f = gguf::GgufFile::open(testing::stories_path());
  ASSERT_TRUE(f.ok());
  gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*f)));
  EngineConfig config;
  config.cache.memory_utilization = 0.5;
  auto worker = start(*platform_, source, config);
  ASSERT_TRUE(worker);
  const DeviceMemory mem = platform_->memory_info(0);
  ASSERT_GT(mem.total_bytes, 0);
  auto budget = worker->determine_available_memory();
  ASSERT_TRUE(budget.ok()) << budget.status().to_string();
  // What warm-up and serving allocate after the KV cache is kept back (about 36 MiB here).
  EngineConfig checked = config;
  checked.scheduler.max_num_batched_tokens = 128;  // as start() set it
  ASSERT_TRUE(platform_->check_and_update_config(checked).ok());
  const int64_t kept = cuda::later_allocations(RunnerSettings::from(checked), *worker->model_info(), true).total();
  EXPECT_GT(kept, 32 << 20);
  const double want = 0.5 * static_cast<double>(mem.total_bytes) -
                      static_cast<double>(mem.total_bytes - mem.free_bytes) - static_cast<double>(kept);
  EXPECT_NEAR(static_cast<double>(*budget), want, 64.0 * (1 << 20));  // other processes may move a little
  EXPECT_LT(*budget, mem.total_bytes / 2);
}

TEST_F(CudaWorkerTest, GoldenStories260KGreedyMatchesLlamaCpp) {
  auto gen = generation::OfflineGenerator::create(*platform_, EngineConfig(), testing::stories_path());
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  EXPECT_EQ((*gen)->worker().platform_name(), "cuda");
  const auto g = testing::stories_golden();
  int exact = 0;
  for (const auto& c : g["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    sampling::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = c["n_predict"].get<int>();
    p.ignore_eos = true;
    auto out = (*gen)->generate(prompt_ids, p);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_matches_case(c, out->token_ids);
    exact += out->token_ids == c["output_ids"].get<std::vector<int32_t>>();
  }
  std::printf("stories260K on cuda: %d of %zu cases token-exact with llama.cpp\n", exact, g["cases"].size());
  EXPECT_GE(exact, static_cast<int>(g["cases"].size()) - 3);
}

TEST_F(CudaWorkerTest, GoldenSmolLM2ChatAnswersParisThroughTheCli) {
  const char* model = std::getenv("TROUPE_TEST_MODEL");
  if (!model || !*model) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
  const std::string args = std::string("generate '") + model +
                           "' --chat -p 'What is the capital of France?' -n 48 --json";
  auto gpu = testing::run_troupe(args + " --device cuda");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_NE(gpu.err.find("cuda worker rank 0"), std::string::npos) << gpu.err;
  auto j = nlohmann::json::parse(gpu.out);
  EXPECT_NE(j["text"].get<std::string>().find("Paris"), std::string::npos) << j["text"];
  // And the automatic choice picks cuda when a GPU can serve the model.
  auto automatic = testing::run_troupe(args, "env -u TROUPE_DEVICE");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_NE(automatic.err.find("cuda worker rank 0"), std::string::npos) << automatic.err;
}

}  // namespace
}  // namespace troupe
