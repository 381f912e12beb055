// The actor engine on a real model (stories260K) through the real CPU platform
// plugin: batch invariance, prefix caching, preemption, abort, stat events,
// LoRA names.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "actors/engine_caf.hpp"
#include "actors/messages.hpp"
#include "runtime/rank/lora/lora_writer.hpp"

namespace {

using troupe::engine::Engine;
using troupe::engine::EngineOptions;
using troupe::engine::FinalOutput;
using troupe::engine::GenerateRequest;
using troupe::engine::RequestOutput;

const std::string kModel = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
const std::string kStatFile = std::filesystem::temp_directory_path() / ("troupe_engine_test_" + std::to_string(getpid()) + ".jsonl");

// Plugins are loaded once per process: set up the environment before any engine starts.
class PluginEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TROUPE_PLUGIN_PATH", TROUPE_EXAMPLE_PLUGIN_DIR, 1);
    setenv("TROUPE_PLUGINS", "cpu,stat_logger_jsonl", 1);  // not the example's out-of-tree platform
    setenv("TROUPE_STAT_LOG_FILE", kStatFile.c_str(), 1);
    std::filesystem::remove(kStatFile);
  }
  void TearDown() override { std::filesystem::remove(kStatFile); }
};
[[maybe_unused]] const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new PluginEnvironment);

std::vector<std::string> prompts(size_t n) {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/stories260K_llamacpp.json");
  auto golden = nlohmann::json::parse(in);
  std::vector<std::string> base;
  for (const auto& c : golden["cases"]) base.push_back(c["prompt"].get<std::string>());
  std::vector<std::string> out;
  for (size_t i = 0; out.size() < n; ++i) {
    std::string p = base[i % base.size()];
    if (i >= base.size()) p += i % 2 ? " and the cat" : " One day";
    if (i >= 2 * base.size()) p = "Tom said " + p;
    out.push_back(p);
  }
  return out;
}

std::unique_ptr<Engine> start_engine(int64_t num_blocks = 0, bool prefix_caching = true, double log_interval = 0,
                                     int max_num_seqs = 64) {
  EngineOptions opts;
  opts.config.model.model_path = kModel;
  opts.config.cache.enable_prefix_caching = prefix_caching;
  opts.config.cache.num_gpu_blocks_override = num_blocks;
  opts.config.scheduler.max_num_seqs = max_num_seqs;
  opts.config.scheduler.max_num_batched_tokens = 256;
  opts.config.parallel.num_threads = 2;
  opts.stat_log_interval_s = log_interval;
  auto engine = Engine::start(std::move(opts));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

GenerateRequest greedy(const std::string& prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

/// Submits every request at once and waits for all to finish.
std::vector<FinalOutput> run_concurrently(Engine& engine, const std::vector<GenerateRequest>& reqs) {
  std::vector<FinalOutput> outs(reqs.size());
  std::vector<std::promise<void>> done(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = engine.submit(reqs[i], [&outs, &done, i](RequestOutput o) {
      troupe::engine::accumulate(outs[i], o);
      if (o.finished) done[i].set_value();
    });
    EXPECT_TRUE(id.ok()) << id.status().to_string();
  }
  for (auto& d : done) EXPECT_EQ(d.get_future().wait_for(std::chrono::minutes(5)), std::future_status::ready);
  return outs;
}

/// Collects stat events from a C++ callback.
struct StatsSink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<troupe::engine::StatsEvent> events;
  void operator()(const troupe::engine::StatsEvent& ev) {
    std::lock_guard lock(mu);
    events.push_back(ev);
    cv.notify_all();
  }
  int64_t total(int64_t troupe::SchedulerStats::*field) {
    std::lock_guard lock(mu);
    int64_t sum = 0;
    for (auto& e : events) sum += e.scheduler.*field;
    return sum;
  }
};

TEST(ActorEngine, BatchOf32EqualsEachPromptAlone) {
  auto engine = start_engine();
  ASSERT_TRUE(engine);
  auto ps = prompts(32);
  std::vector<GenerateRequest> reqs;
  for (auto& p : ps) reqs.push_back(greedy(p, 24));
  std::vector<FinalOutput> alone;
  for (auto& r : reqs) {
    auto out = engine->generate(r);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    alone.push_back(*out);
  }
  auto batched = run_concurrently(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(batched[i].token_ids, alone[i].token_ids) << "prompt " << i << ": " << ps[i];
    EXPECT_EQ(batched[i].text, alone[i].text);
    EXPECT_EQ(batched[i].finish_reason, troupe::FinishReason::length);
  }
  EXPECT_GT(engine->max_running_requests(), 8) << "the requests did not run together";
}

TEST(ActorEngine, PrefixCacheHitsOnSharedPrefixKeepOutputs) {
  std::string prefix =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.";
  std::vector<GenerateRequest> reqs;
  for (auto tail : {" One day", " She saw a dog", " Her mom said", " The sun was"}) reqs.push_back(greedy(prefix + tail, 16));

  std::vector<FinalOutput> uncached;
  {
    auto engine = start_engine(0, /*prefix_caching=*/false);
    ASSERT_TRUE(engine);
    for (auto& r : reqs) uncached.push_back(*engine->generate(r));
  }
  auto engine = start_engine(0, /*prefix_caching=*/true);
  ASSERT_TRUE(engine);
  StatsSink sink;
  engine->subscribe_stats(std::ref(sink));
  ASSERT_TRUE(engine->generate(reqs[0]).ok());  // fills the cache with the shared prefix
  auto cached = run_concurrently(*engine, {reqs.begin() + 1, reqs.end()});
  for (size_t i = 1; i < reqs.size(); ++i) EXPECT_EQ(cached[i - 1].token_ids, uncached[i].token_ids) << i;
  auto again = engine->generate(reqs[0]);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->token_ids, uncached[0].token_ids);
  EXPECT_GT(sink.total(&troupe::SchedulerStats::prefix_cache_hits), 16);
}

TEST(ActorEngine, PreemptionUnderTinyKvCacheKeepsOutputs) {
  auto ps = prompts(8);
  std::vector<GenerateRequest> reqs;
  for (auto& p : ps) reqs.push_back(greedy(p, 40));
  std::vector<FinalOutput> alone;
  {
    auto engine = start_engine();
    ASSERT_TRUE(engine);
    for (auto& r : reqs) alone.push_back(*engine->generate(r));
  }
  // 10 blocks of 16 tokens: room for about three of these requests at a time.
  auto engine = start_engine(/*num_blocks=*/10);
  ASSERT_TRUE(engine);
  StatsSink sink;
  engine->subscribe_stats(std::ref(sink));
  auto outs = run_concurrently(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(outs[i].token_ids, alone[i].token_ids) << ps[i];
  EXPECT_GT(sink.total(&troupe::SchedulerStats::num_preempted_reqs), 0) << "the cache was not small enough to preempt";
}

TEST(ActorEngine, AbortMidGenerationFreesEveryBlock) {
  auto engine = start_engine();
  ASSERT_TRUE(engine);
  StatsSink sink;
  engine->subscribe_stats(std::ref(sink));
  std::promise<void> got_tokens, finished;
  std::atomic<int> tokens{0};
  troupe::FinishReason reason = troupe::FinishReason::stop;
  auto id = engine->submit(greedy("Once upon a time", 1000), [&](RequestOutput o) {
    if (tokens.fetch_add(static_cast<int>(o.new_token_ids.size())) < 5 &&
        tokens.load() >= 5)
      got_tokens.set_value();
    if (o.finished) {
      reason = o.finish_reason;
      finished.set_value();
    }
  });
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(got_tokens.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  engine->abort(*id);
  ASSERT_EQ(finished.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(reason, troupe::FinishReason::abort);
  EXPECT_LT(tokens.load(), 1000);
  // The scheduler reports the freed blocks right after the abort.
  std::unique_lock lock(sink.mu);
  bool freed = sink.cv.wait_for(lock, std::chrono::seconds(30), [&] {
    return !sink.events.empty() && sink.events.back().scheduler.kv_cache_usage == 0.0 &&
           sink.events.back().scheduler.num_running_reqs == 0;
  });
  EXPECT_TRUE(freed) << "KV usage after abort: " << (sink.events.empty() ? -1 : sink.events.back().scheduler.kv_cache_usage);
}

TEST(ActorEngine, StatLoggerPluginAndSubscribersReceiveEvents) {
  auto engine = start_engine(0, true, /*log_interval=*/0.2);
  ASSERT_TRUE(engine);
  // A C++ callback subscriber...
  StatsSink sink;
  engine->subscribe_stats(std::ref(sink));
  // ...and an actor subscriber.
  auto actor_events = std::make_shared<std::atomic<int>>(0);
  auto subscriber = engine->system().spawn([actor_events](troupe::actors::stats_subscriber_actor::pointer)
                                               -> troupe::actors::stats_subscriber_actor::behavior_type {
    return {[actor_events](troupe::actors::stats_atom, const troupe::actors::StatsEvent& ev) {
      if (ev.iteration.num_generation_tokens > 0) (*actor_events)++;
    }};
  });
  // Enqueued before the request exists, so the stat logger handles it before any of its steps.
  caf::anon_send(troupe::engine::stat_logger(*engine), troupe::actors::subscribe_atom_v, subscriber);
  auto out = engine->generate(greedy("Once upon a time", 20));
  ASSERT_TRUE(out.ok());
  // Wait (bounded) for the events; none is missed or counted twice.
  for (int i = 0; i < 500 && actor_events->load() < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(actor_events->load(), 20) << "one event per generated token (each step generated one)";
  {
    std::unique_lock lock(sink.mu);
    auto generated = [&] {
      int64_t n = 0;
      for (auto& e : sink.events) n += e.iteration.num_generation_tokens;
      return n;
    };
    EXPECT_TRUE(sink.cv.wait_for(lock, std::chrono::seconds(5), [&] { return generated() >= 20; }));
    EXPECT_EQ(generated(), 20);
  }
  // The plugin writes one line per 0.2 s interval; wait (bounded) for the interval after the last step.
  int64_t generated = 0;
  for (int attempt = 0; attempt < 100 && generated < 20; ++attempt) {
    generated = 0;
    std::ifstream in(kStatFile);
    std::string line;
    while (std::getline(in, line)) generated += nlohmann::json::parse(line)["generation_tokens"].get<int64_t>();
    if (generated < 20) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(generated, 20) << "the stat_logger_jsonl plugin logged too little to " << kStatFile;
  caf::anon_send_exit(subscriber, caf::exit_reason::user_shutdown);
}

TEST(ActorEngine, BadRequestsFailAtSubmit) {
  auto engine = start_engine();
  ASSERT_TRUE(engine);
  auto bad = greedy("hello", 10);
  bad.sampling.temperature = -1;
  EXPECT_FALSE(engine->submit(bad, [](RequestOutput) {}).ok());
  auto too_long = greedy("hello", 100000);
  auto r = engine->submit(too_long, [](RequestOutput) {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("maximum context length"), std::string::npos);
  GenerateRequest ids;
  ids.prompt_token_ids = {1, 99999};
  EXPECT_FALSE(engine->submit(ids, [](RequestOutput) {}).ok());
  // The engine still works afterwards.
  EXPECT_TRUE(engine->generate(greedy("Once upon a time", 4)).ok());
}

TEST(ActorEngine, DeadWorkerEndsRequestsWithErrorAndMarksUnhealthy) {
  auto engine = start_engine();
  ASSERT_TRUE(engine);
  std::promise<std::string> ended;
  std::atomic<bool> killed{false};
  auto workers = troupe::engine::worker_actors(*engine);
  ASSERT_EQ(workers.size(), 1u);
  auto id = engine->submit(greedy("Once upon a time", 1500), [&](RequestOutput o) {
    // Kill the worker once tokens flow: the request must end, not hang.
    if (!killed.exchange(true)) caf::anon_send_exit(workers[0], caf::exit_reason::kill);
    if (o.finished) ended.set_value(std::string(to_string(o.finish_reason)) + ": " + o.error.to_string());
  });
  ASSERT_TRUE(id.ok());
  auto f = ended.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the request hung";
  EXPECT_EQ(f.get().rfind("error: ", 0), 0u);
  // The engine says why it is unhealthy and refuses new work instead of hanging.
  for (int i = 0; i < 100 && engine->healthy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(engine->healthy());
  EXPECT_NE(engine->unhealthy_reason().find("worker"), std::string::npos) << engine->unhealthy_reason();
  auto again = engine->submit(greedy("hello", 4), [](RequestOutput) {});
  EXPECT_FALSE(again.ok());
}

TEST(ActorEngine, ThrowingStatsSubscriberDoesNotStopStats) {
  auto engine = start_engine();
  ASSERT_TRUE(engine);
  auto bad = engine->subscribe_stats([](const troupe::engine::StatsEvent&) { throw std::runtime_error("boom"); });
  ASSERT_TRUE(engine->generate(greedy("Once upon a time", 4)).ok());
  engine->unsubscribe_stats(bad);
  std::atomic<int64_t> generated{0};
  auto good = engine->subscribe_stats(
      [&](const troupe::engine::StatsEvent& ev) { generated += ev.iteration.num_generation_tokens; });
  ASSERT_TRUE(engine->generate(greedy("Once upon a time", 6)).ok());
  engine->unsubscribe_stats(good);  // after this the callback (and `generated`) is never touched again
  EXPECT_EQ(generated.load(), 6);
}

// LoRA names through the engine: an adapter that an unfinished request holds is
// not unloaded (unavailable; the name stays usable), afterwards it is, and the
// name is then unknown to new requests; a new load never reuses the id.
TEST(ActorEngine, LoraInUseIsNotUnloaded) {
  const std::string adapter =
      std::filesystem::temp_directory_path() / ("troupe_engine_test_lora_" + std::to_string(getpid()) + ".gguf");
  ASSERT_TRUE(troupe::lora::write_random_lora(kModel, {}, adapter).ok());
  EngineOptions opts;
  opts.config.model.model_path = kModel;
  opts.config.parallel.num_threads = 2;
  opts.config.lora.enable_lora = true;
  opts.stat_log_interval_s = 0;
  auto started = Engine::start(std::move(opts));
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  auto engine = std::move(started).value();
  auto loaded = engine->load_lora_adapter("a", adapter);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();

  // The first delta's callback waits: the engine actor cannot deliver the last one meanwhile.
  std::promise<void> first, release, done;
  auto released = release.get_future().share();
  bool seen = false;
  auto request = greedy("Once upon a time", 6);
  request.lora_name = "a";
  auto id = engine->submit(request, [&](RequestOutput o) {
    if (!seen) {
      seen = true;
      first.set_value();
      released.wait();
    }
    if (o.finished) done.set_value();
  });
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  ASSERT_EQ(first.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  troupe::Status busy = engine->unload_lora_adapter("a");
  EXPECT_EQ(busy.code(), troupe::StatusCode::unavailable) << busy.to_string();
  EXPECT_NE(busy.message().find("in use by 1 unfinished request"), std::string::npos) << busy.message();
  EXPECT_EQ(engine->lora_adapters().size(), 1u);
  release.set_value();
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);

  troupe::Status unloaded = engine->unload_lora_adapter("a");
  EXPECT_TRUE(unloaded.ok()) << unloaded.to_string();
  EXPECT_TRUE(engine->lora_adapters().empty());
  auto unknown = engine->submit(request, [](RequestOutput) {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), troupe::StatusCode::not_found);
  EXPECT_EQ(engine->unload_lora_adapter("a").code(), troupe::StatusCode::not_found);
  auto again = engine->load_lora_adapter("a", adapter);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_GT(again->id, loaded->id);
  EXPECT_TRUE(engine->generate(request).ok());
  std::filesystem::remove(adapter);
}

}  // namespace
