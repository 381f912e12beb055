// Speculative decoding end to end through the engine core and the real CPU worker:
// with the n-gram drafter, greedy output is token for token (and logprob for logprob)
// what decoding without drafts gives, for batches mixing requests with and without
// drafts, long and short requests, a stop string and a max_tokens cut, under a small
// token budget (chunked prefill beside verification) and with prefix-cache hits on
// blocks that speculative steps filled. On stories260K and, when TROUPE_TEST_MODEL is
// set, SmolLM2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/engine_core/in_process_executor.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/rank/runner/worker_runner.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/core_steps.hpp"

namespace troupe {
namespace {

struct Job {
  std::string prompt;
  sampling::SamplingParams params;
};

struct RunResult {
  std::map<std::string, engine::FinalOutput> outputs;
  SpecDecodingStats spec;
};

// An engine core over one in-process CPU rank, running a batch of requests to the end.
class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const std::string& path, const SpeculativeConfig& spec,
                                                int64_t max_num_batched_tokens) {
    Platform* platform = testing::cpu_platform();
    if (!platform) return unavailable("no CPU platform plugin in the build tree");
    runtime::register_builtin_models();
    auto e = std::unique_ptr<Engine>(new Engine());
    EngineConfig config;
    config.model.model_path = path;
    config.parallel.num_threads = 2;
    config.cache.num_gpu_blocks_override = 192;
    config.model.max_model_len = 1024;
    config.speculative = spec;
    auto artifacts = engine::load_model_artifacts(config);
    if (!artifacts) return artifacts.status();
    e->artifacts_ = std::move(artifacts).value();
    TROUPE_RETURN_IF_ERROR(platform->check_and_update_config(config));
    e->executor_ = std::make_unique<engine::InProcessExecutor>(*platform);
    auto loaded = e->executor_->run_on_all(engine::LoadModel{config});
    if (!loaded) return loaded.status();
    auto plan = engine::set_up_kv_cache(*e->executor_, config, loaded->front().info.context_length);
    if (!plan) return plan.status();
    engine::EngineCoreConfig core;
    core.scheduler.max_num_batched_tokens = max_num_batched_tokens;
    core.scheduler.max_num_seqs = 8;
    core.scheduler.max_model_len = plan->max_model_len;
    core.kv.num_blocks = static_cast<int32_t>(plan->num_blocks);
    core.kv.block_size = plan->spec.block_size;
    core.kv.enable_prefix_caching = true;
    Engine* self = e.get();
    e->core_ = std::make_unique<engine::EngineCore>(core, e->artifacts_.tokenizer, [self](engine::EngineCoreOutputs out) {
      for (auto& o : out.outputs) engine::accumulate(self->result_.outputs[o.request_id], o);
      if (!out.has_stats) return;
      const SpecDecodingStats& d = out.stats.scheduler.spec_decoding;
      auto& t = self->result_.spec;
      t.num_drafts += d.num_drafts;
      t.num_draft_tokens += d.num_draft_tokens;
      t.num_accepted_tokens += d.num_accepted_tokens;
      if (t.num_accepted_tokens_per_pos.size() < d.num_accepted_tokens_per_pos.size())
        t.num_accepted_tokens_per_pos.resize(d.num_accepted_tokens_per_pos.size(), 0);
      for (size_t i = 0; i < d.num_accepted_tokens_per_pos.size(); ++i)
        t.num_accepted_tokens_per_pos[i] += d.num_accepted_tokens_per_pos[i];
    });
    return e;
  }

  RunResult run(const std::vector<Job>& jobs) {
    result_ = {};
    for (size_t i = 0; i < jobs.size(); ++i) {
      engine::CoreRequest r;
      r.request_id = "r" + std::to_string(next_++);
      r.prompt_token_ids = artifacts_.tokenizer->encode(jobs[i].prompt, true, false);
      r.sampling = jobs[i].params;
      r.seed = 1234 + i;
      Status s = core_->add_request(std::move(r));
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    testing::step_until_done(*core_, *executor_);
    // Renumber by position in the batch, so two runs compare entry by entry.
    RunResult by_position;
    by_position.spec = result_.spec;
    for (size_t j = 0; j < jobs.size(); ++j) {
      const std::string id = "r" + std::to_string(next_ - jobs.size() + j);
      by_position.outputs["job" + std::to_string(j)] = result_.outputs[id];
    }
    return by_position;
  }

 private:
  Engine() = default;
  engine::ModelArtifacts artifacts_;
  std::unique_ptr<engine::InProcessExecutor> executor_;
  std::unique_ptr<engine::EngineCore> core_;
  RunResult result_;
  int64_t next_ = 0;
};

sampling::SamplingParams greedy(int max_tokens) {
  sampling::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

std::vector<Job> jobs_for(const std::string& model) {
  std::vector<Job> jobs;
  if (model == "stories260K") {
    jobs.push_back({"Once upon a time, there was a little girl named Lily. She liked to play with her ball. Once upon "
                    "a time, there was a little",
                    greedy(80)});
    jobs.push_back({"Tom", greedy(60)});
    jobs.push_back({"The cat sat on the mat. The dog sat on the mat. The cat", greedy(7)});  // cut by max_tokens
    auto with_logprobs = greedy(50);
    with_logprobs.logprobs = 3;
    jobs.push_back({"Lily and Ben went to the park. Lily and Ben", with_logprobs});
    auto with_stop = greedy(70);
    with_stop.stop = {" park"};
    jobs.push_back({"One day, Sue went to the park. She saw a big tree in the park. One day, Sue went", with_stop});
  } else {
    jobs.push_back({"Repeat the following text exactly.\nText: The quick brown fox jumps over the lazy dog near the "
                    "river bank, and the dog does not move.\nRepeated text:",
                    greedy(40)});
    jobs.push_back({"Write a haiku about the sea.", greedy(24)});
    jobs.push_back({"Fix the typo in this sentence and write it again: 'The weather is beautifull today and we "
                    "are going to the beach.' Corrected sentence:",
                    greedy(30)});
    auto with_logprobs = greedy(20);
    with_logprobs.logprobs = 2;
    jobs.push_back({"List the numbers from one to ten in words: one, two, three,", with_logprobs});
  }
  return jobs;
}

class SpecDecodeGreedy : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "smollm2") {
      const char* env = std::getenv("TROUPE_TEST_MODEL");
      if (!env || !*env) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
      path_ = env;
    } else {
      path_ = testing::stories_path();
    }
  }
  std::string path_;
};

void expect_same(const RunResult& want, const RunResult& got, const std::string& what) {
  ASSERT_EQ(want.outputs.size(), got.outputs.size()) << what;
  for (const auto& [id, w] : want.outputs) {
    const auto& g = got.outputs.at(id);
    EXPECT_EQ(g.token_ids, w.token_ids) << what << ", " << id;
    EXPECT_EQ(g.text, w.text) << what << ", " << id;
    EXPECT_EQ(g.finish_reason, w.finish_reason) << what << ", " << id;
    ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << what << ", " << id;
    for (size_t i = 0; i < w.logprobs.size(); ++i) {
      EXPECT_EQ(g.logprobs[i].token_id, w.logprobs[i].token_id);
      EXPECT_FLOAT_EQ(g.logprobs[i].logprob, w.logprobs[i].logprob) << what << ", " << id << " token " << i;
      EXPECT_EQ(g.logprobs[i].top_ids, w.logprobs[i].top_ids);
    }
  }
}

TEST_P(SpecDecodeGreedy, OutputIsTokenIdenticalToDecodingWithoutDrafts) {
  const std::vector<Job> jobs = jobs_for(GetParam());
  auto plain = Engine::create(path_, SpeculativeConfig{}, 2048);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  const RunResult want = (*plain)->run(jobs);
  EXPECT_EQ(want.spec.num_drafts, 0);
  for (const auto& [id, w] : want.outputs) {
    EXPECT_TRUE(w.finished) << id;
    EXPECT_FALSE(w.token_ids.empty()) << id;
  }
  if (GetParam() == "stories260K") {
    EXPECT_LE(want.outputs.at("job2").token_ids.size(), 7u);
  }

  for (int64_t budget : {2048, 24}) {
    auto spec = Engine::create(path_, SpeculativeConfig{"ngram", 4, 3, 1}, budget);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    const RunResult got = (*spec)->run(jobs);
    expect_same(want, got, "budget " + std::to_string(budget));
    EXPECT_GT(got.spec.num_drafts, 0);
    EXPECT_GT(got.spec.num_accepted_tokens, 0) << "no draft was ever accepted: the test proves little";
    EXPECT_LE(got.spec.num_accepted_tokens, got.spec.num_draft_tokens);
    EXPECT_EQ(std::accumulate(got.spec.num_accepted_tokens_per_pos.begin(), got.spec.num_accepted_tokens_per_pos.end(),
                              int64_t{0}),
              got.spec.num_accepted_tokens);
    // Again on the same engine: the prompts now hit prefix-cache blocks that speculative
    // steps filled; only accepted tokens may be cached, so the output stays the same.
    const RunResult again = (*spec)->run(jobs);
    expect_same(want, again, "cached, budget " + std::to_string(budget));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpecDecodeGreedy, ::testing::Values("stories260K", "smollm2"));

TEST(SpecDecodeSampled, SeededSamplingWithDraftsRunsToItsLengthAndIsReproducible) {
  sampling::SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.max_tokens = 40;
  p.ignore_eos = true;
  const std::vector<Job> jobs = {{"Once upon a time, there was a little girl. Once upon a time, there was", p},
                                 {"The dog ran. The dog ran. The dog", p}};
  auto a = Engine::create(testing::stories_path(), SpeculativeConfig{"ngram", 3, 3, 1}, 2048);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  const RunResult first = (*a)->run(jobs);
  EXPECT_GT(first.spec.num_drafts, 0);
  for (const auto& [id, out] : first.outputs) {
    EXPECT_EQ(out.token_ids.size(), 40u) << id;
    EXPECT_EQ(out.finish_reason, FinishReason::length) << id;
  }
  auto b = Engine::create(testing::stories_path(), SpeculativeConfig{"ngram", 3, 3, 1}, 2048);
  ASSERT_TRUE(b.ok());
  const RunResult second = (*b)->run(jobs);
  for (const auto& [id, out] : first.outputs) EXPECT_EQ(second.outputs.at(id).token_ids, out.token_ids) << id;
}

TEST(SpecDecodeConfig, TheDriverRefusesAnInvalidConfig) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  EngineConfig config;
  config.model.model_path = testing::stories_path();
  config.parallel.num_threads = 1;
  config.speculative = SpeculativeConfig{"ngram", 3, 3, 5};  // prompt_lookup_min 5 > max 3
  auto bad = engine::WorkerRunner::create(*platform, config, engine::kDriverRank);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must not exceed"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace troupe
