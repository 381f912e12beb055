// EngineCore without actors or a model: a scripted executor answers each step
// with the tokens a test chose, so stopping, aborts, failures and stats are
// checked exactly.
#include "runtime/core/engine_core/engine_core.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>

#include "engine_test_support.hpp"

namespace troupe::engine {
namespace {

using testing::ids_of;
using testing::stories_tokenizer;
using testing::streamed_text;

/// Answers each step with the next scripted token of every request that samples.
class ScriptedExecutor final : public Executor {
 public:
  std::map<std::string, std::vector<int32_t>> script;
  std::vector<StepInput> inputs;
  Status fail;          // not ok: the next steps fail with it
  bool defer = false;   // hold the answer until release()
  int extra_tokens = 0; // answer with this many extra (wrong) tokens

  using StepDone = std::function<void(Result<StepOutput>)>;

  std::vector<RankCommand> commands;  // every command but steps, in order
  std::string fail_command;           // a command of this kName fails on "rank 1"
  int ranks = 2;                      // sleep, wake-up and LoRA answer once per rank

  void collective(RankCommand command, Done done) override {
    auto* step = std::get_if<ExecuteStep>(&command.op);
    if (!step) {
      const char* name = std::visit([](const auto& c) { return std::decay_t<decltype(c)>::kName; }, command.op);
      commands.push_back(command);
      if (name == fail_command) return done(data_loss(std::string(command.what()) + " on rank 1: broken"));
      Replies replies;
      for (int r = 0; r < ranks; ++r) {
        if (std::holds_alternative<Sleep>(command.op)) replies.emplace_back(int64_t{1000 + r});
        else replies.emplace_back(engine::Done{});
      }
      return done(std::move(replies));
    }
    answer(std::move(step->input), [done = std::move(done)](Result<StepOutput> out) {
      if (!out) return done(out.status());
      done(Replies{RankReply(std::move(out).value())});
    });
  }

  void answer(StepInput in, StepDone done) {
    inputs.push_back(in);
    for (const auto& r : in.new_requests)
      if (r.pooling) pooling_.insert(r.request_id);
    if (!fail.ok()) return done(fail);
    StepOutput out;
    out.step = in.step;
    for (const auto& id : in.sample_ids) {
      auto& s = script[id];
      size_t& p = pos_[id];
      SampledToken t{p < s.size() ? s[p] : filler(), 0.0f, {}, {}, {}};
      if (pooling_.count(id)) t.embedding = {static_cast<float>(in.step), 1.0f, 2.0f};
      out.tokens.push_back(std::move(t));
      ++p;
    }
    for (int i = 0; i < extra_tokens; ++i) out.tokens.push_back(SampledToken{filler(), 0.0f, {}, {}, {}});
    if (defer) {
      pending_ = std::move(done);
      pending_out_ = std::move(out);
      return;
    }
    done(std::move(out));
  }
  bool holding() const { return static_cast<bool>(pending_); }
  void release() {
    auto done = std::move(pending_);
    pending_ = nullptr;
    done(std::move(pending_out_));
  }

 private:
  static int32_t filler() { return ids_of(" the").front(); }
  std::map<std::string, size_t> pos_;
  std::set<std::string> pooling_;  // requests the driver pools instead of sampling
  StepDone pending_;
  StepOutput pending_out_;
};

class EngineCoreTest : public ::testing::Test {
 protected:
  EngineCoreTest() : core_(config(), stories_tokenizer(), [this](EngineCoreOutputs o) { events_.push_back(std::move(o)); }) {}

  static EngineCoreConfig config() {
    EngineCoreConfig c;
    c.scheduler.max_loras = 2;
    c.scheduler.max_num_batched_tokens = 256;
    c.scheduler.max_num_seqs = 8;
    c.scheduler.max_model_len = 1024;
    c.kv.num_blocks = 64;
    c.kv.block_size = 16;
    return c;
  }

  static CoreRequest request(const std::string& id, int max_tokens, std::vector<std::string> stop = {}) {
    CoreRequest r;
    r.request_id = id;
    r.prompt_token_ids = ids_of(" Lily went to the park");
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    r.sampling.stop = std::move(stop);
    return r;
  }

  /// Steps until nothing is left (bounded).
  void run_to_completion() {
    for (int i = 0; i < 1000 && core_.has_unfinished_requests(); ++i)
      ASSERT_EQ(core_.step(exec_), StepStatus::started);
    ASSERT_FALSE(core_.has_unfinished_requests());
  }

  std::map<std::string, FinalOutput> finals() const {
    std::map<std::string, FinalOutput> out;
    for (const auto& e : events_)
      for (const auto& o : e.outputs) accumulate(out[o.request_id], o);
    return out;
  }

  int64_t total(int64_t IterationStats::*field) const {
    int64_t s = 0;
    for (const auto& e : events_) s += e.stats.iteration.*field;
    return s;
  }

  ScriptedExecutor exec_;
  std::vector<EngineCoreOutputs> events_;
  EngineCore core_;
};

TEST_F(EngineCoreTest, TwoRequestsRunTogetherToTheirLength) {
  exec_.script["a"] = ids_of(" Once upon a time there");
  exec_.script["b"] = ids_of(" The dog ran home");
  exec_.script["a"].resize(5);
  exec_.script["b"].resize(4);
  ASSERT_TRUE(core_.add_request(request("a", 5)).ok());
  ASSERT_TRUE(core_.add_request(request("b", 4)).ok());
  run_to_completion();
  auto f = finals();
  EXPECT_EQ(f["a"].token_ids, exec_.script["a"]);
  EXPECT_EQ(f["a"].text, streamed_text(exec_.script["a"]));
  EXPECT_EQ(f["a"].finish_reason, FinishReason::length);
  EXPECT_EQ(f["b"].token_ids, exec_.script["b"]);
  EXPECT_EQ(f["b"].finish_reason, FinishReason::length);
  // The first step prefilled both prompts; one event per step, each with stats.
  EXPECT_EQ(exec_.inputs.front().new_requests.size(), 2u);
  EXPECT_EQ(events_.front().num_scheduled_requests, 2);
  EXPECT_EQ(events_.size(), 5u);
  for (const auto& e : events_) EXPECT_TRUE(e.has_stats);
  EXPECT_EQ(total(&IterationStats::num_generation_tokens), 9);
  EXPECT_EQ(total(&IterationStats::num_prompt_tokens), 2 * static_cast<int64_t>(ids_of(" Lily went to the park").size()));
  size_t finished = 0, ttfts = 0;
  for (const auto& e : events_) {
    finished += e.stats.iteration.finished_requests.size();
    ttfts += e.stats.iteration.time_to_first_tokens_s.size();
  }
  EXPECT_EQ(finished, 2u);
  EXPECT_EQ(ttfts, 2u);
  EXPECT_EQ(events_.back().stats.scheduler.kv_cache_usage, 0.0);
  // The ranks were told to forget both requests.
  std::vector<std::string> forgotten;
  for (const auto& in : exec_.inputs) forgotten.insert(forgotten.end(), in.finished_ids.begin(), in.finished_ids.end());
  EXPECT_NE(std::find(forgotten.begin(), forgotten.end(), "b"), forgotten.end());
}

TEST_F(EngineCoreTest, StopStringEndsTheRequestAndFreesItsBlocks) {
  exec_.script["a"] = ids_of(" Once upon a time there was a dog");
  exec_.script["b"] = ids_of(" The dog ran home and then the cat came");
  ASSERT_TRUE(core_.add_request(request("a", 50, {"time there"})).ok());
  ASSERT_TRUE(core_.add_request(request("b", 10)).ok());
  run_to_completion();
  auto f = finals();
  const std::string full = streamed_text(exec_.script["a"]);
  EXPECT_EQ(f["a"].finish_reason, FinishReason::stop);
  EXPECT_EQ(f["a"].stop_reason, "time there");
  EXPECT_EQ(f["a"].text, full.substr(0, full.find("time there")));
  EXPECT_LT(f["a"].token_ids.size(), exec_.script["a"].size());
  EXPECT_EQ(f["b"].finish_reason, FinishReason::length);
  EXPECT_EQ(f["b"].token_ids.size(), 10u);
  // "a" stopped sampling at once: later steps sample only "b".
  const size_t a_tokens = f["a"].token_ids.size();
  for (size_t s = a_tokens; s < exec_.inputs.size(); ++s)
    EXPECT_EQ(exec_.inputs[s].sample_ids, std::vector<std::string>{"b"}) << "step " << s;
}

TEST_F(EngineCoreTest, EndOfGenerationStopsUnlessIgnored) {
  auto eos = stories_tokenizer()->eos_id();
  exec_.script["a"] = ids_of(" Once upon");
  exec_.script["a"].push_back(eos);
  exec_.script["b"] = exec_.script["a"];
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  auto ignoring = request("b", 4);
  ignoring.sampling.ignore_eos = true;
  ASSERT_TRUE(core_.add_request(ignoring).ok());
  run_to_completion();
  auto f = finals();
  EXPECT_EQ(f["a"].finish_reason, FinishReason::stop);
  EXPECT_EQ(f["a"].token_ids.back(), eos);
  EXPECT_EQ(f["a"].text, streamed_text(ids_of(" Once upon")));
  EXPECT_EQ(f["b"].finish_reason, FinishReason::length);
  EXPECT_EQ(f["b"].token_ids.size(), 4u);
}

TEST_F(EngineCoreTest, AbortBetweenStepsPublishesTheFreedBlocksAtOnce) {
  exec_.script["a"] = ids_of(" Once upon a time there was");
  ASSERT_TRUE(core_.add_request(request("a", 100)).ok());
  ASSERT_EQ(core_.step(exec_), StepStatus::started);
  ASSERT_GT(events_.back().stats.scheduler.kv_cache_usage, 0.0);
  ASSERT_TRUE(core_.abort_request("a"));
  EXPECT_FALSE(core_.abort_request("a"));  // no longer live
  const auto& e = events_.back();
  ASSERT_EQ(e.outputs.size(), 1u);
  EXPECT_TRUE(e.outputs[0].finished);
  EXPECT_EQ(e.outputs[0].finish_reason, FinishReason::abort);
  ASSERT_TRUE(e.has_stats);
  EXPECT_EQ(e.stats.scheduler.kv_cache_usage, 0.0);
  EXPECT_EQ(e.stats.scheduler.num_scheduled_tokens, 0);  // nothing counted twice
  ASSERT_EQ(e.stats.iteration.finished_requests.size(), 1u);
  EXPECT_EQ(e.stats.iteration.finished_requests[0].finish_reason, "abort");
  EXPECT_FALSE(core_.has_unfinished_requests());
  EXPECT_EQ(core_.step(exec_), StepStatus::idle);
}

TEST_F(EngineCoreTest, AbortDuringAStepIsReportedWithTheNextStats) {
  exec_.script["a"] = ids_of(" Once upon a time");
  exec_.script["b"] = ids_of(" The dog ran home and");
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  ASSERT_TRUE(core_.add_request(request("b", 3)).ok());
  exec_.defer = true;
  ASSERT_EQ(core_.step(exec_), StepStatus::started);
  ASSERT_TRUE(exec_.holding());
  EXPECT_EQ(core_.step(exec_), StepStatus::idle);  // one step at a time
  ASSERT_TRUE(core_.abort_request("a"));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_FALSE(events_[0].has_stats);  // the step in flight will report
  EXPECT_EQ(events_[0].outputs[0].finish_reason, FinishReason::abort);
  exec_.defer = false;
  exec_.release();
  ASSERT_EQ(events_.size(), 2u);
  // The step's token for "a" is dropped; "b" got its first token.
  ASSERT_EQ(events_[1].outputs.size(), 1u);
  EXPECT_EQ(events_[1].outputs[0].request_id, "b");
  ASSERT_EQ(events_[1].stats.iteration.finished_requests.size(), 1u);
  EXPECT_EQ(events_[1].stats.iteration.finished_requests[0].request_id, "a");
  run_to_completion();
  EXPECT_EQ(finals()["b"].token_ids.size(), 3u);
}

TEST_F(EngineCoreTest, AFailedStepEndsEveryRequestWithItsStatusAndTheCoreRefusesMore) {
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  ASSERT_TRUE(core_.add_request(request("b", 10)).ok());
  exec_.fail = data_loss("rank 1: model.gguf: truncated");
  ASSERT_EQ(core_.step(exec_), StepStatus::started);
  auto f = finals();
  for (const char* id : {"a", "b"}) {
    EXPECT_EQ(f[id].finish_reason, FinishReason::error) << id;
    EXPECT_EQ(f[id].error.code(), StatusCode::data_loss) << id;
    EXPECT_NE(f[id].error.message().find("rank 1"), std::string::npos) << f[id].error.message();
  }
  EXPECT_FALSE(core_.healthy());
  EXPECT_EQ(events_.back().health.code(), StatusCode::data_loss);
  EXPECT_FALSE(core_.has_unfinished_requests());
  auto refused = core_.add_request(request("c", 2));
  EXPECT_EQ(refused.code(), StatusCode::unavailable);
  EXPECT_EQ(core_.step(exec_), StepStatus::idle);
}

TEST_F(EngineCoreTest, ADriverAnsweringTheWrongNumberOfTokensFailsTheStep) {
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  exec_.extra_tokens = 1;
  ASSERT_EQ(core_.step(exec_), StepStatus::started);
  auto f = finals();
  EXPECT_EQ(f["a"].finish_reason, FinishReason::error);
  EXPECT_EQ(f["a"].error.code(), StatusCode::internal);
  EXPECT_FALSE(core_.healthy());
}

TEST_F(EngineCoreTest, BadRequestsAreRefusedWithTheSchedulersReason) {
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  EXPECT_EQ(core_.add_request(request("a", 10)).code(), StatusCode::invalid_argument);  // duplicate id
  EXPECT_EQ(core_.add_request(request("big", 5000)).code(), StatusCode::out_of_range);
  auto empty = request("e", 3);
  empty.prompt_token_ids.clear();
  EXPECT_EQ(core_.add_request(empty).code(), StatusCode::invalid_argument);
}

TEST_F(EngineCoreTest, PoolingRequestsEndAfterTheirPromptWithTheirVector) {
  auto a = request("a", 16);
  a.pooling = PoolingParams{};
  auto b = request("b", 16);
  b.pooling = PoolingParams{PoolingType::cls, true, std::nullopt};
  ASSERT_TRUE(core_.add_request(a).ok());
  ASSERT_TRUE(core_.add_request(b).ok());
  ASSERT_EQ(core_.step(exec_), StepStatus::started);
  EXPECT_FALSE(core_.has_unfinished_requests()) << "a pooling request takes one step";
  ASSERT_EQ(exec_.inputs.size(), 1u);
  ASSERT_EQ(exec_.inputs[0].new_requests.size(), 2u);
  EXPECT_TRUE(exec_.inputs[0].new_requests[1].pooling);
  EXPECT_EQ(exec_.inputs[0].new_requests[1].pooling_params.type, PoolingType::cls);
  auto f = finals();
  for (const char* id : {"a", "b"}) {
    EXPECT_TRUE(f[id].finished);
    EXPECT_EQ(f[id].finish_reason, FinishReason::stop);
    EXPECT_EQ(f[id].embedding, (std::vector<float>{1.0f, 1.0f, 2.0f}));
    EXPECT_TRUE(f[id].token_ids.empty());
  }
  EXPECT_EQ(total(&IterationStats::num_generation_tokens), 0);
  EXPECT_EQ(events_.back().stats.iteration.finished_requests.size(), 2u);
  EXPECT_EQ(events_.back().stats.scheduler.kv_cache_usage, 0.0);
}

TEST_F(EngineCoreTest, FailAllEndsLiveRequestsOnce) {
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  core_.fail_all(unavailable("the worker actor of rank 0 died"));
  auto f = finals();
  EXPECT_EQ(f["a"].finish_reason, FinishReason::error);
  EXPECT_EQ(f["a"].error.code(), StatusCode::unavailable);
  core_.fail_all(internal_error("later"));
  EXPECT_EQ(core_.health().message(), "the worker actor of rank 0 died");  // the first reason stays
}

TEST_F(EngineCoreTest, ALostRankIsNamedOverAnEarlierStepFailure) {
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  // A node dies: the surviving rank's step fails first, naming its own node.
  core_.fail_all(unavailable("step on rank 0 (node A): rank 1 closed its connection"));
  EXPECT_EQ(finals()["a"].finish_reason, FinishReason::error);
  const size_t before = events_.size();
  core_.fail_lost(unavailable("rank 1 (node B) is unreachable"));
  EXPECT_EQ(core_.health().message(), "rank 1 (node B) is unreachable");
  ASSERT_GT(events_.size(), before) << "the new reason must reach the sink";
  EXPECT_EQ(events_.back().health.message(), "rank 1 (node B) is unreachable");
  // The first loss stays, whatever comes after it.
  core_.fail_lost(unavailable("rank 0 (node A) is unreachable"));
  core_.fail_all(internal_error("later"));
  EXPECT_EQ(core_.health().message(), "rank 1 (node B) is unreachable");
}

TEST_F(EngineCoreTest, ALostRankOnAHealthyCoreFailsItsRequests) {
  ASSERT_TRUE(core_.add_request(request("a", 10)).ok());
  core_.fail_lost(unavailable("rank 1 (node B) is unreachable"));
  auto f = finals();
  EXPECT_EQ(f["a"].finish_reason, FinishReason::error);
  EXPECT_EQ(f["a"].error.message(), "rank 1 (node B) is unreachable");
  EXPECT_FALSE(core_.healthy());
  EXPECT_FALSE(core_.add_request(request("b", 10)).ok());
}

// Sleep mode and LoRA: the core's state and the commands its ranks get, without actors.

template <class T>
struct Captured {
  std::optional<T> value;
  auto sink() {
    return [this](T v) { value = std::move(v); };
  }
};

TEST_F(EngineCoreTest, SleepStopsSteppingUntilBothPartsAreAwake) {
  Captured<Result<int64_t>> bad;
  core_.sleep(exec_, 3, bad.sink());
  ASSERT_TRUE(bad.value.has_value());
  EXPECT_EQ(bad.value->status().code(), StatusCode::invalid_argument);
  EXPECT_TRUE(exec_.commands.empty()) << "a refused sleep reached the ranks";

  Captured<Result<int64_t>> freed;
  core_.sleep(exec_, 1, freed.sink());
  ASSERT_TRUE(freed.value.has_value() && freed.value->ok()) << freed.value->status().to_string();
  EXPECT_EQ(**freed.value, 1000 + 1001) << "the bytes every rank freed, added up";
  EXPECT_EQ(core_.sleep_level(), 1);
  EXPECT_EQ(events_.back().stats.scheduler.sleep_level, 1) << "the state reaches the stats at once";

  exec_.script["a"] = ids_of(" Once upon a time");
  exec_.script["a"].resize(2);
  EXPECT_FALSE(core_.sleep_wait_left(EngineCore::Clock::now()).has_value()) << "nothing waits yet";
  ASSERT_TRUE(core_.add_request(request("a", 2)).ok());
  EXPECT_EQ(core_.step(exec_), StepStatus::asleep) << "a sleeping core ran a step";
  // The wait is bounded (60 s by default); step() ends the request once it is due.
  const auto now = EngineCore::Clock::now();
  const auto left = core_.sleep_wait_left(now);
  ASSERT_TRUE(left.has_value());
  EXPECT_GT(*left, std::chrono::seconds(50));
  EXPECT_LE(*left, std::chrono::seconds(60));
  EXPECT_EQ(core_.sleep_wait_left(now + std::chrono::seconds(61)), EngineCore::Clock::duration::zero());

  Captured<Result<bool>> weights;
  core_.wake_up(exec_, {"weights"}, weights.sink());
  ASSERT_TRUE(weights.value.has_value() && weights.value->ok());
  EXPECT_FALSE(**weights.value) << "the KV cache still sleeps";
  EXPECT_EQ(core_.step(exec_), StepStatus::asleep);

  Captured<Result<bool>> kv;
  core_.wake_up(exec_, {"kv_cache"}, kv.sink());
  ASSERT_TRUE(kv.value.has_value() && kv.value->ok());
  EXPECT_TRUE(**kv.value);
  EXPECT_EQ(core_.sleep_level(), 0);
  run_to_completion();
  EXPECT_EQ(finals()["a"].token_ids, exec_.script["a"]);

  ASSERT_EQ(exec_.commands.size(), 3u);
  EXPECT_EQ(std::get<Sleep>(exec_.commands[0].op).level, 1);
  EXPECT_EQ(std::get<WakeUp>(exec_.commands[1].op).tags, (std::vector<std::string>{"weights"}));
  EXPECT_EQ(std::get<WakeUp>(exec_.commands[2].op).tags, (std::vector<std::string>{"kv_cache"}));
}

TEST_F(EngineCoreTest, SleepIsRefusedWhileRequestsAreUnfinished) {
  ASSERT_TRUE(core_.add_request(request("a", 4)).ok());
  Captured<Result<int64_t>> refused;
  core_.sleep(exec_, 2, refused.sink());
  ASSERT_TRUE(refused.value.has_value());
  EXPECT_EQ(refused.value->status().code(), StatusCode::unavailable);
  EXPECT_NE(refused.value->status().message().find("1 waiting"), std::string::npos) << refused.value->status().message();
  EXPECT_EQ(core_.sleep_level(), 0);
  EXPECT_TRUE(exec_.commands.empty());
}

TEST_F(EngineCoreTest, AnAdapterRequestsMayNameOnlyOnceEveryRankHoldsIt) {
  CoreRequest with_lora = request("a", 1);
  with_lora.lora_id = 7;
  EXPECT_FALSE(core_.add_request(with_lora).ok()) << "an unknown adapter was accepted";

  exec_.fail_command = "AddLora";
  Captured<Status> failed;
  core_.add_lora(exec_, 7, "/adapters/a.gguf", failed.sink());
  ASSERT_TRUE(failed.value.has_value());
  EXPECT_EQ(failed.value->code(), StatusCode::data_loss);
  EXPECT_NE(failed.value->message().find("rank 1: broken"), std::string::npos);
  ASSERT_EQ(exec_.commands.size(), 2u);
  EXPECT_EQ(std::get<RemoveLora>(exec_.commands[1].op).lora_id, 7) << "the ranks that loaded it drop it again";
  EXPECT_FALSE(core_.add_request(with_lora).ok());

  exec_.fail_command.clear();
  Captured<Status> added;
  core_.add_lora(exec_, 7, "/adapters/a.gguf", added.sink());
  ASSERT_TRUE(added.value.has_value() && added.value->ok()) << added.value->to_string();
  EXPECT_EQ(std::get<AddLora>(exec_.commands.back().op).path, "/adapters/a.gguf");
  ASSERT_TRUE(core_.add_request(with_lora).ok());

  Captured<Status> in_use;
  core_.remove_lora(exec_, 7, in_use.sink());
  ASSERT_TRUE(in_use.value.has_value());
  EXPECT_EQ(in_use.value->code(), StatusCode::unavailable);
  EXPECT_FALSE(std::holds_alternative<RemoveLora>(exec_.commands.back().op)) << "an adapter in use left the ranks";

  run_to_completion();
  Captured<Status> removed;
  core_.remove_lora(exec_, 7, removed.sink());
  ASSERT_TRUE(removed.value.has_value() && removed.value->ok()) << removed.value->to_string();
  EXPECT_EQ(std::get<RemoveLora>(exec_.commands.back().op).lora_id, 7);
  EXPECT_FALSE(core_.add_request(with_lora).ok());
}

}  // namespace
}  // namespace troupe::engine
