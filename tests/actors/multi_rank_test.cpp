// The actor protocol with several ranks: a fake platform whose workers compute
// deterministic logits stands in for a model, hosted by the real worker,
// kv_cache, scheduler and engine actors. Every step goes to every rank; only
// the driver samples; a slow rank is waited for; a failing rank fails the step
// with its status; a rank that never answers fails it after the finite
// timeout.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "runtime/config/engine_config.hpp"
#include "actors/engine_caf.hpp"
#include "actors/engine_actors.hpp"
#include "actors/rank_group.hpp"
#include "actors/messages.hpp"
#include "actors/status_error.hpp"
#include "actors/worker_actor.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "runtime/rank/runner/worker_runner.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::actors {
namespace {

constexpr int64_t kVocab = 512;  // stories260K's tokenizer

/// The token a fake rank's logits favour after `t`.
int32_t next_token(int32_t t) { return static_cast<int32_t>(3 + (t * 7 + 1) % 500); }

/// What fake ranks do, set per test.
struct Behaviour {
  int slow_rank = -1;            // sleeps kSlow in every step
  int fail_rank = -1;            // fails its fail_at-th step with data_loss
  int fail_at = 1;
  int silent_rank = -1;          // never answers a step until released
  int fail_load_rank = -1;       // load_model fails with data_loss
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> steps[4] = {0, 0, 0, 0};  // execute_model calls per rank

  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
};

class FakeWorker final : public Worker {
 public:
  FakeWorker(Behaviour& b, int rank) : Worker("fake"), b_(b), rank_(rank) {
    info_.architecture = "fake";
    info_.vocab_size = kVocab;
    info_.context_length = 256;
    info_.num_layers = 1;
    info_.num_heads = 1;
    info_.num_kv_heads = 1;
    info_.head_dim = 4;
  }
  Status init_device() override { return {}; }
  Status load_model(const ModelSource&) override {
    if (rank_ == b_.fail_load_rank) return data_loss("rank " + std::to_string(rank_) + ": the weights are corrupt");
    loaded_ = true;
    return {};
  }
  Result<KvCacheSpec> get_kv_cache_spec() const override { return KvCacheSpec{16, 1, 1, 4, DType::f32}; }
  // Ranks offer different amounts: the smallest (rank 0) must decide.
  Result<int64_t> determine_available_memory() override { return (rank_ + 1) * 64 * 512; }
  Status initialize_from_config(const KvCacheConfig& c) override { return allocate(c.num_blocks); }
  Status allocate(int64_t num_blocks) {
    blocks_ = num_blocks;
    return {};
  }
  Status compile_or_warm_up_model() override { return {}; }
  const ModelInfo* model_info() const override { return loaded_ ? &info_ : nullptr; }

  Result<ModelRunnerOutput> execute_model(const ExecuteModelRequest& req) override {
    const int n = ++b_.steps[rank_];
    if (rank_ == b_.slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    if (rank_ == b_.fail_rank && n == b_.fail_at)
      return data_loss("rank " + std::to_string(rank_) + " read a corrupt shard");
    if (rank_ == b_.silent_rank) {
      std::unique_lock lock(b_.mu);
      b_.cv.wait(lock, [&] { return b_.released; });
    }
    ModelRunnerOutput out;
    out.vocab_size = kVocab;
    out.logits.assign(req.batch.logits_indices.size() * kVocab, 0.0f);
    for (size_t i = 0; i < req.batch.logits_indices.size(); ++i)
      out.logits[i * kVocab + next_token(req.batch.token_ids[req.batch.logits_indices[i]])] = 10.0f;
    return out;
  }

 private:
  Behaviour& b_;
  int rank_;
  ModelInfo info_;
  bool loaded_ = false;
  int64_t blocks_ = 0;
};

class FakePlatform final : public Platform {
 public:
  explicit FakePlatform(Behaviour& b) : b_(b) {}
  PlatformEnum platform_enum() const override { return PlatformEnum::out_of_tree; }
  std::string device_type() const override { return "fake"; }
  std::string device_name(int id) const override { return "fake" + std::to_string(id); }
  Status check_and_update_config(ConfigEditor&) const override { return {}; }
  Result<std::unique_ptr<AttentionBackend>> make_attention_backend(const ConfigView&) const override {
    return not_supported("fake");
  }
  Result<std::unique_ptr<Ops>> make_ops(const ConfigView&) const override { return not_supported("fake"); }
  Result<std::unique_ptr<DeviceCommunicator>> make_device_communicator(const ConfigView&, int) const override {
    return not_supported("fake");
  }
  Result<std::unique_ptr<Worker>> make_worker(const ConfigView&, int rank) const override {
    return std::unique_ptr<Worker>(new FakeWorker(b_, rank));
  }
  DeviceMemory memory_info(int) const override { return {}; }
  std::vector<std::string> supported_quantizations() const override { return {}; }

 private:
  Behaviour& b_;
};

std::shared_ptr<const tokenizer::Tokenizer> stories_tokenizer() {
  auto file = gguf::GgufFile::open(std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf");
  auto tok = gguf::read_tokenizer(**file);
  return std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok).value());
}

/// Ranks of the fake platform on real worker actors, sized by the real
/// one KV set-up path (engine::set_up_kv_cache), driven by the real scheduler and engine actors.
class Cluster {
 public:
  Cluster(int ranks, Behaviour& behaviour, std::chrono::milliseconds step_timeout = std::chrono::seconds(60))
      : platform_(behaviour) {
    engine::configure_actor_system(cfg_);
    system_ = std::make_unique<caf::actor_system>(cfg_);
    config_.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
    config_.parallel.tensor_parallel_size = ranks;
    config_.scheduler.max_num_seqs = 8;
    config_.scheduler.max_num_batched_tokens = 64;
    for (int r = 0; r < ranks; ++r) workers_.push_back(spawn_worker_actor(*system_, &platform_, r));
    BlockingRankExecutor all(*system_, RankGroup{workers_, {}, std::chrono::seconds(30)});
    if (auto loaded = all.run_on_all(engine::LoadModel{config_}); !loaded) {
      start_error_ = loaded.status();
      return;
    }
    auto plan = engine::set_up_kv_cache(all, config_, 256);
    if (!plan) {
      start_error_ = plan.status();
      return;
    }
    plan_ = *plan;
    EngineActorsSetup setup;
    setup.config = config_;
    setup.kv_plan = plan_;
    setup.tokenizer = stories_tokenizer();
    setup.workers = workers_;
    setup.router = router_;
    setup.stat_loggers.log_interval_s = 0;
    setup.step_timeout = step_timeout;
    actors_ = spawn_engine_actors(*system_, std::move(setup));
  }

  ~Cluster() {
    caf::anon_send_exit(actors_.scheduler, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(actors_.stat_logger, caf::exit_reason::user_shutdown);
    for (auto& w : workers_) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    actors_ = {};
    workers_.clear();
    system_.reset();
  }

  const Status& start_error() const { return start_error_; }
  const KvCachePlan& plan() const { return plan_; }
  engine::OutputRouter& router() { return *router_; }
  std::string unhealthy_reason() { return router_->unhealthy_reason(); }
  /// The worker of `rank` goes away, as when its node is lost.
  void kill_worker(int rank) { caf::anon_send_exit(workers_[static_cast<size_t>(rank)], caf::exit_reason::kill); }

  /// Submit greedy requests and wait (bounded) for all to finish.
  std::vector<engine::FinalOutput> run(const std::vector<std::vector<int32_t>>& prompts, int max_tokens) {
    std::vector<engine::FinalOutput> outs(prompts.size());
    std::vector<std::promise<void>> done(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      CoreRequest request;
      request.request_id = std::string("r").append(std::to_string(i));
      request.prompt_token_ids = prompts[i];
      request.sampling.temperature = 0;
      request.sampling.max_tokens = max_tokens;
      request.sampling.ignore_eos = true;
      router_->add(request.request_id, [&outs, &done, i](engine::RequestOutput o) {
        engine::accumulate(outs[i], o);
        if (o.finished) done[i].set_value();
      });
      caf::anon_send(actors_.scheduler, submit_atom_v, std::move(request));
    }
    for (auto& d : done)
      EXPECT_EQ(d.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready) << "a request hung";
    return outs;
  }

 private:
  FakePlatform platform_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> system_;
  EngineConfig config_;
  std::vector<worker_actor> workers_;
  KvCachePlan plan_;
  std::shared_ptr<engine::OutputRouter> router_ = std::make_shared<engine::OutputRouter>();
  EngineActors actors_;
  Status start_error_;
};

std::vector<int32_t> expected(const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  int32_t t = prompt.back();
  for (int i = 0; i < n; ++i) out.push_back(t = next_token(t));
  return out;
}

const std::vector<std::vector<int32_t>> kPrompts = {{1, 50, 60}, {1, 70}, {1, 80, 90, 100, 110}};

TEST(MultiRank, EveryRankRunsEveryStepAndTheDriversTokensAreUsed) {
  Behaviour b;
  Cluster c(2, b);
  ASSERT_TRUE(c.start_error().ok()) << c.start_error().to_string();
  auto outs = c.run(kPrompts, 6);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(outs[i].finish_reason, FinishReason::length) << outs[i].error.to_string();
    EXPECT_EQ(outs[i].token_ids, expected(kPrompts[i], 6)) << i;
  }
  EXPECT_GT(b.steps[0].load(), 1);
  EXPECT_EQ(b.steps[0].load(), b.steps[1].load()) << "ranks ran different numbers of steps";
  EXPECT_TRUE(c.router().healthy());
}

TEST(MultiRank, KvCacheIsSizedByTheSmallestRank) {
  Behaviour b;
  Cluster c(4, b);
  ASSERT_TRUE(c.start_error().ok()) << c.start_error().to_string();
  const int64_t per_block = KvCacheSpec{16, 1, 1, 4, DType::f32}.bytes_per_block();
  EXPECT_EQ(c.plan().num_blocks, 64 * 512 / per_block);  // rank 0 offers the least
}

TEST(MultiRank, ASlowRankIsWaitedFor) {
  Behaviour b;
  b.slow_rank = 2;
  Cluster c(4, b);
  ASSERT_TRUE(c.start_error().ok()) << c.start_error().to_string();
  auto outs = c.run({kPrompts[0], kPrompts[1]}, 4);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(outs[i].token_ids, expected(kPrompts[i], 4)) << i;
  for (int r = 1; r < 4; ++r) EXPECT_EQ(b.steps[r].load(), b.steps[0].load()) << "rank " << r;
}

TEST(MultiRank, AFailingRankFailsTheStepWithItsStatus) {
  Behaviour b;
  b.fail_rank = 3;
  b.fail_at = 2;
  Cluster c(4, b);
  ASSERT_TRUE(c.start_error().ok()) << c.start_error().to_string();
  auto outs = c.run(kPrompts, 20);
  int in_flight = 0;
  for (const auto& o : outs) {
    EXPECT_EQ(o.finish_reason, FinishReason::error);
    // In flight when the step failed: the rank's own status. Submitted after it
    // (the submits race the failing step): refused, naming the same failure.
    if (o.error.code() == StatusCode::data_loss) ++in_flight;
    else EXPECT_EQ(o.error.code(), StatusCode::unavailable) << o.error.to_string();
    EXPECT_NE(o.error.message().find("rank 3 read a corrupt shard"), std::string::npos) << o.error.to_string();
    EXPECT_LT(o.token_ids.size(), 20u);
  }
  EXPECT_GE(in_flight, 1);
  EXPECT_FALSE(c.router().healthy());
  EXPECT_NE(c.unhealthy_reason().find("rank 3"), std::string::npos) << c.unhealthy_reason();
}

// A node dies: the surviving rank's step fails first (its collective peer went away) and
// sets the first reason, naming the survivor; then the lost rank's down message comes.
// /health must name the rank actually lost.
TEST(MultiRank, TheLostRankIsNamedEvenWhenTheSurvivorsFailedStepCameFirst) {
  Behaviour b;
  b.fail_rank = 0;
  b.fail_at = 2;
  Cluster c(2, b);
  ASSERT_TRUE(c.start_error().ok()) << c.start_error().to_string();
  auto outs = c.run({kPrompts[0]}, 20);
  EXPECT_EQ(outs[0].finish_reason, FinishReason::error);
  EXPECT_NE(c.unhealthy_reason().find("rank 0 read a corrupt shard"), std::string::npos) << c.unhealthy_reason();
  c.kill_worker(1);
  bool named = false;
  for (int i = 0; i < 200 && !named; ++i) {
    named = c.unhealthy_reason().find("the worker of rank 1 died") != std::string::npos;
    if (!named) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(named) << c.unhealthy_reason();
  EXPECT_FALSE(c.router().healthy());
}

TEST(MultiRank, ARankThatNeverAnswersFailsTheStepAfterTheTimeout) {
  Behaviour b;
  b.silent_rank = 1;
  Cluster c(2, b, std::chrono::milliseconds(300));
  ASSERT_TRUE(c.start_error().ok()) << c.start_error().to_string();
  auto t0 = std::chrono::steady_clock::now();
  auto outs = c.run({kPrompts[0]}, 5);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(outs[0].finish_reason, FinishReason::error);
  EXPECT_EQ(outs[0].error.code(), StatusCode::unavailable);
  EXPECT_NE(outs[0].error.message().find("the worker of rank 1 did not answer the step within 300 ms"), std::string::npos)
      << outs[0].error.to_string();
  EXPECT_FALSE(c.router().healthy());
  b.release();  // let the silent rank's thread finish before the cluster stops
}

TEST(MultiRank, ALoadErrorKeepsItsCodeThroughTheActors) {
  Behaviour b;
  b.fail_load_rank = 1;
  Cluster c(2, b);
  EXPECT_EQ(c.start_error().code(), StatusCode::data_loss) << c.start_error().to_string();
  EXPECT_NE(c.start_error().message().find("rank 1: the weights are corrupt"), std::string::npos);
}

TEST(MultiRank, OnlyTheDriverRankSamples) {
  Behaviour b;
  FakePlatform platform(b);
  EngineConfig config;
  config.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
  auto driver = engine::WorkerRunner::create(platform, config, 0);
  auto other = engine::WorkerRunner::create(platform, config, 1);
  ASSERT_TRUE(driver.ok() && other.ok());
  ASSERT_TRUE((*driver)->initialize_cache(KvCacheSpec{16, 1, 1, 4, DType::f32}, 4).ok());
  ASSERT_TRUE((*other)->initialize_cache(KvCacheSpec{16, 1, 1, 4, DType::f32}, 4).ok());
  StepInput in;
  in.step = 1;
  in.batch.token_ids = {1, 50};
  in.batch.positions = {0, 1};
  in.batch.query_start = {0, 2};
  in.batch.seq_lens = {2};
  in.batch.block_tables = {{0}};
  in.batch.slot_mapping = {0, 1};
  in.batch.logits_indices = {1};
  engine::SamplingState s;
  s.request_id = "r";
  s.params.temperature = 0;
  s.prompt_token_ids = {1, 50};
  in.new_requests = {s};
  in.sample_ids = {"r"};
  auto a = (*driver)->execute(in);
  auto z = (*other)->execute(in);
  ASSERT_TRUE(a.ok() && z.ok());
  ASSERT_EQ(a->tokens.size(), 1u);
  EXPECT_EQ(a->tokens[0].token, next_token(50));
  EXPECT_EQ(a->rank, 0);
  EXPECT_TRUE(z->tokens.empty());
  EXPECT_EQ(z->rank, 1);
  EXPECT_EQ(b.steps[1].load(), 1);  // it still ran the model
}

}  // namespace
}  // namespace troupe::actors
