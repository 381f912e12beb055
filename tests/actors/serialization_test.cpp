// Every message that may cross a process goes through CAF's binary serializer
// and comes back equal: step input and output, worker replies, stats events,
// configs, and errors (each StatusCode keeps its code and message).
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "runtime/config/engine_config.hpp"
#include "actors/engine_caf.hpp"
#include "actors/messages.hpp"
#include "actors/status_error.hpp"

namespace troupe::actors {
namespace {

/// One actor system for the whole test program, stopped before exit (not at static destruction).
class SystemEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    config_ = std::make_unique<caf::actor_system_config>();
    engine::configure_actor_system(*config_);
    system_ = std::make_unique<caf::actor_system>(*config_);
  }
  void TearDown() override {
    system_.reset();
    config_.reset();
  }
  static caf::actor_system& system() { return *system_; }

 private:
  static inline std::unique_ptr<caf::actor_system_config> config_;
  static inline std::unique_ptr<caf::actor_system> system_;
};
[[maybe_unused]] const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SystemEnvironment);

caf::actor_system& system() { return SystemEnvironment::system(); }

/// Serialize `value` and read it back into a fresh T.
template <class T>
T round_trip(const T& value) {
  std::vector<char> buf;
  caf::binary_serializer sink{system(), buf};
  T copy = value;
  if (auto err = sink(copy)) ADD_FAILURE() << "serialize: " << system().render(err);
  EXPECT_FALSE(buf.empty());
  T out{};
  caf::binary_deserializer source{system(), buf};
  if (auto err = source(out)) ADD_FAILURE() << "deserialize: " << system().render(err);
  return out;
}

/// Through a whole caf::message, as the middleman sends it (needs the type IDs).
template <class... Ts>
caf::message message_round_trip(Ts... xs) {
  caf::message msg = caf::make_message(std::move(xs)...);
  std::vector<char> buf;
  caf::binary_serializer sink{system(), buf};
  if (auto err = sink(msg)) ADD_FAILURE() << "serialize message: " << system().render(err);
  caf::message out;
  caf::binary_deserializer source{system(), buf};
  if (auto err = source(out)) ADD_FAILURE() << "deserialize message: " << system().render(err);
  return out;
}

StepInput sample_step_input() {
  StepInput in;
  in.step = 42;
  in.batch.token_ids = {5, 6, 7, 8};
  in.batch.positions = {0, 1, 2, 9};
  in.batch.query_start = {0, 3, 4};
  in.batch.seq_lens = {3, 10};
  in.batch.block_tables = {{0}, {1, 2}};
  in.batch.slot_mapping = {0, 1, 2, 41};
  in.batch.logits_indices = {2, 3};
  SamplingState s;
  s.request_id = "req-1";
  s.params.temperature = 0.7f;
  s.params.top_k = 40;
  s.params.seed = 1234;
  s.params.stop = {"\n\n", "END"};
  s.params.stop_token_ids = {2};
  s.params.logprobs = 3;
  s.params.logit_bias = {{7, -100.0f}, {3, 2.5f}};
  s.params.allowed_token_ids = {3, 7, 11};
  s.params.min_tokens = 4;
  s.params.min_tokens_banned_ids = {2, 0};
  s.params.bad_words_token_ids = {{13}, {4, 8, 15}};
  s.seed = 99;
  s.prompt_token_ids = {1, 5, 6, 7};
  s.output_token_ids = {11};
  in.new_requests = {s};
  in.finished_ids = {"req-0"};
  in.sample_ids = {"req-1", "req-2"};
  in.draft_token_ids = {{}, {9, 10}};
  return in;
}

void expect_equal(const StepInput& a, const StepInput& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.batch.token_ids, b.batch.token_ids);
  EXPECT_EQ(a.batch.positions, b.batch.positions);
  EXPECT_EQ(a.batch.query_start, b.batch.query_start);
  EXPECT_EQ(a.batch.seq_lens, b.batch.seq_lens);
  EXPECT_EQ(a.batch.block_tables, b.batch.block_tables);
  EXPECT_EQ(a.batch.slot_mapping, b.batch.slot_mapping);
  EXPECT_EQ(a.batch.logits_indices, b.batch.logits_indices);
  ASSERT_EQ(a.new_requests.size(), b.new_requests.size());
  const auto& x = a.new_requests[0];
  const auto& y = b.new_requests[0];
  EXPECT_EQ(x.request_id, y.request_id);
  EXPECT_EQ(x.params.temperature, y.params.temperature);
  EXPECT_EQ(x.params.top_k, y.params.top_k);
  EXPECT_EQ(x.params.seed, y.params.seed);
  EXPECT_EQ(x.params.stop, y.params.stop);
  EXPECT_EQ(x.params.stop_token_ids, y.params.stop_token_ids);
  EXPECT_EQ(x.params.logprobs, y.params.logprobs);
  EXPECT_EQ(x.params.logit_bias, y.params.logit_bias);
  EXPECT_EQ(x.params.allowed_token_ids, y.params.allowed_token_ids);
  EXPECT_EQ(x.params.min_tokens, y.params.min_tokens);
  EXPECT_EQ(x.params.min_tokens_banned_ids, y.params.min_tokens_banned_ids);
  EXPECT_EQ(x.params.bad_words_token_ids, y.params.bad_words_token_ids);
  EXPECT_EQ(x.seed, y.seed);
  EXPECT_EQ(x.prompt_token_ids, y.prompt_token_ids);
  EXPECT_EQ(x.output_token_ids, y.output_token_ids);
  EXPECT_EQ(a.finished_ids, b.finished_ids);
  EXPECT_EQ(a.sample_ids, b.sample_ids);
  EXPECT_EQ(a.draft_token_ids, b.draft_token_ids);
}

TEST(Serialization, StepInputRoundTrips) {
  auto in = sample_step_input();
  expect_equal(round_trip(in), in);
  // A seedless request stays seedless.
  in.new_requests[0].params.seed.reset();
  EXPECT_FALSE(round_trip(in).new_requests[0].params.seed.has_value());
}

TEST(Serialization, AStepCommandRoundTripsInsideAMessage) {
  auto in = sample_step_input();
  auto msg = message_round_trip(rank_atom_v, engine::RankCommand(engine::ExecuteStep{in}));
  ASSERT_TRUE((msg.match_elements<rank_atom, engine::RankCommand>()));
  const auto& command = msg.get_as<engine::RankCommand>(1);
  ASSERT_TRUE(std::holds_alternative<engine::ExecuteStep>(command.op));
  expect_equal(std::get<engine::ExecuteStep>(command.op).input, in);
  EXPECT_STREQ(command.what(), "the step");
}

TEST(Serialization, EveryRankCommandRoundTripsAsItself) {
  EngineConfig config;
  config.model.model_path = "/models/a.gguf";
  config.parallel.tensor_parallel_size = 2;
  const std::vector<engine::RankCommand> commands = {
      engine::LoadModel{config},
      engine::SizeKvCache{},
      engine::AllocateKvCache{KvCacheSpec{16, 2, 1, 8, DType::f16}, 77},
      engine::WarmUp{},
      engine::ExecuteStep{sample_step_input()},
      engine::Sleep{2},
      engine::WakeUp{{"weights", "kv_cache"}},
      engine::AddLora{3, "/adapters/x.gguf"},
      engine::RemoveLora{4},
  };
  ASSERT_EQ(commands.size(), std::variant_size_v<engine::RankCommand::Op>) << "a command is missing here";
  for (const auto& c : commands) {
    auto back = round_trip(c);
    ASSERT_EQ(back.op.index(), c.op.index()) << c.what();
  }
  EXPECT_EQ(std::get<engine::LoadModel>(round_trip(commands[0]).op).config.model.model_path, "/models/a.gguf");
  EXPECT_EQ(std::get<engine::LoadModel>(round_trip(commands[0]).op).config.parallel.tensor_parallel_size, 2);
  const auto alloc = std::get<engine::AllocateKvCache>(round_trip(commands[2]).op);
  EXPECT_EQ(alloc.num_blocks, 77);
  EXPECT_EQ(alloc.spec.dtype, DType::f16);
  EXPECT_EQ(std::get<engine::Sleep>(round_trip(commands[5]).op).level, 2);
  EXPECT_EQ(std::get<engine::WakeUp>(round_trip(commands[6]).op).tags, (std::vector<std::string>{"weights", "kv_cache"}));
  const auto add = std::get<engine::AddLora>(round_trip(commands[7]).op);
  EXPECT_EQ(add.lora_id, 3);
  EXPECT_EQ(add.path, "/adapters/x.gguf");
  EXPECT_EQ(std::get<engine::RemoveLora>(round_trip(commands[8]).op).lora_id, 4);
}

TEST(Serialization, EveryRankReplyRoundTripsAsItself) {
  StepOutput out;
  out.rank = 1;
  out.tokens = {SampledToken{17, -0.25f, {}, {}, {}}};
  WorkerInitReply init;
  init.platform = "cpu";
  const std::vector<engine::RankReply> replies = {engine::Done{}, init, KvSizing{KvCacheSpec{16, 1, 1, 4, DType::f32}, 99},
                                                  out, int64_t{12345}};
  ASSERT_EQ(replies.size(), std::variant_size_v<engine::RankReply::Value>) << "a reply type is missing here";
  for (const auto& r : replies) EXPECT_EQ(round_trip(r).value.index(), r.value.index());
  EXPECT_EQ(std::get<WorkerInitReply>(round_trip(replies[1]).value).platform, "cpu");
  EXPECT_EQ(std::get<KvSizing>(round_trip(replies[2]).value).available_bytes, 99);
  EXPECT_EQ(std::get<StepOutput>(round_trip(replies[3]).value).tokens.at(0).token, 17);
  EXPECT_EQ(std::get<int64_t>(round_trip(replies[4]).value), 12345);
  // A typed read of the wrong alternative is an error, not a crash.
  EXPECT_EQ(engine::reply_as<engine::Sleep>(replies[0]).status().code(), StatusCode::internal);
  EXPECT_EQ(*engine::reply_as<engine::Sleep>(replies[4]), 12345);
}

TEST(Serialization, ACommandOfAnUnknownKindIsRefused) {
  // What a newer peer might send: an alternative index this build does not have.
  std::vector<char> buf;
  caf::binary_serializer sink{system(), buf};
  uint8_t index = static_cast<uint8_t>(std::variant_size_v<engine::RankCommand::Op>);
  ASSERT_FALSE(sink(index));
  engine::RankCommand out;
  caf::binary_deserializer source{system(), buf};
  EXPECT_TRUE(static_cast<bool>(source(out))) << "an unknown command index was accepted";
}

TEST(Serialization, StepOutputRoundTrips) {
  StepOutput out;
  out.step = 7;
  out.rank = 1;
  out.tokens = {SampledToken{17, -0.25f, {17, 3}, {-0.25f, -1.5f}, {}}, SampledToken{-1, 0.0f, {}, {}, {0.5f, -0.25f}}};
  out.num_accepted = {1, 0};
  out.draft_token_ids = {{4, 5, 6}, {}};
  out.model_seconds = 0.125;
  out.sample_seconds = 0.0625;
  auto back = round_trip(out);
  EXPECT_EQ(back.num_accepted, out.num_accepted);
  EXPECT_EQ(back.draft_token_ids, out.draft_token_ids);
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.rank, 1);
  ASSERT_EQ(back.tokens.size(), 2u);
  EXPECT_EQ(back.tokens[0].token, 17);
  EXPECT_EQ(back.tokens[0].logprob, -0.25f);
  EXPECT_EQ(back.tokens[0].top_ids, (std::vector<int32_t>{17, 3}));
  EXPECT_EQ(back.tokens[0].top_logprobs, (std::vector<float>{-0.25f, -1.5f}));
  EXPECT_EQ(back.tokens[1].token, -1);
  EXPECT_EQ(back.tokens[1].embedding, (std::vector<float>{0.5f, -0.25f}));
  EXPECT_EQ(back.model_seconds, 0.125);
  EXPECT_EQ(back.sample_seconds, 0.0625);
  auto msg = message_round_trip(out);
  ASSERT_TRUE(msg.match_elements<StepOutput>());
  EXPECT_EQ(msg.get_as<StepOutput>(0).tokens.size(), 2u);
}

TEST(Serialization, WorkerRepliesAndKvPlanRoundTrip) {
  WorkerInitReply init;
  init.info = ModelInfo{"llama", 512, 2048, 5, 8, 4, 8, 64, 1u << 20};
  init.platform = "cpu";
  init.device_name = "AMD EPYC";
  init.load_seconds = 0.5;
  auto i = round_trip(init);
  EXPECT_EQ(i.info.architecture, "llama");
  EXPECT_EQ(i.info.vocab_size, 512);
  EXPECT_EQ(i.info.num_kv_heads, 4);
  EXPECT_EQ(i.info.weight_bytes, 1u << 20);
  EXPECT_EQ(i.device_name, "AMD EPYC");

  KvSizing sizing;
  sizing.spec = KvCacheSpec{32, 5, 4, 8, DType::f16};
  sizing.available_bytes = int64_t{3} << 30;
  auto s = round_trip(sizing);
  EXPECT_EQ(s.spec.block_size, 32);
  EXPECT_EQ(s.spec.dtype, DType::f16);
  EXPECT_EQ(s.available_bytes, int64_t{3} << 30);

  KvCachePlan plan{sizing.spec, 1000, 4096};
  auto p = round_trip(plan);
  EXPECT_EQ(p.num_blocks, 1000);
  EXPECT_EQ(p.max_model_len, 4096);
  EXPECT_EQ(p.spec.num_layers, 5);
}

TEST(Serialization, EngineConfigRoundTrips) {
  EngineConfig c;
  c.device = "cpu";
  c.model.model_path = "/models/x.gguf";
  c.model.quantization = "q4_1";
  c.cache.block_size = 32;
  c.cache.num_gpu_blocks_override = 12;
  c.scheduler.max_num_seqs = 7;
  c.parallel.tensor_parallel_size = 4;
  c.parallel.pipeline_parallel_size = 2;
  c.parallel.communicator_id = "cpu-tcp:10.0.0.5:40123:0123456789abcdef";
  c.parallel.communicator_host = "10.0.0.5";
  c.parallel.num_threads = 3;
  c.parallel.worker_cls = "troupe.cpu.CpuWorker";
  c.compilation.graph_mode = "cuda_graph";
  c.extra["chat_template"] = "chatml";
  c.speculative = SpeculativeConfig{"ngram", 4, 5, 2};
  auto b = round_trip(c);
  EXPECT_EQ(b.speculative.method, "ngram");
  EXPECT_EQ(b.speculative.num_speculative_tokens, 4);
  EXPECT_EQ(b.speculative.prompt_lookup_max, 5);
  EXPECT_EQ(b.speculative.prompt_lookup_min, 2);
  EXPECT_EQ(b.device, "cpu");
  EXPECT_EQ(b.model.model_path, c.model.model_path);
  EXPECT_EQ(b.model.quantization, "q4_1");
  EXPECT_EQ(b.cache.block_size, 32);
  EXPECT_EQ(b.cache.num_gpu_blocks_override, 12);
  EXPECT_EQ(b.scheduler.max_num_seqs, 7);
  EXPECT_EQ(b.parallel.tensor_parallel_size, 4);
  EXPECT_EQ(b.parallel.pipeline_parallel_size, 2);
  EXPECT_EQ(b.parallel.communicator_id, c.parallel.communicator_id);
  EXPECT_EQ(b.parallel.communicator_host, "10.0.0.5");
  EXPECT_EQ(b.parallel.num_threads, 3);
  EXPECT_EQ(b.parallel.worker_cls, c.parallel.worker_cls);
  EXPECT_EQ(b.compilation.graph_mode, "cuda_graph");
  EXPECT_EQ(b.extra, c.extra);
}

// The head asks rank 0's node for a communicator id with the ranks' ParallelConfig.
TEST(Serialization, ACommunicatorRequestRoundTripsInsideAMessage) {
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  p.pipeline_parallel_size = 3;
  p.communicator_host = "192.168.1.20";
  p.communicator_secret = "a fresh world secret";
  auto msg = message_round_trip(comm_id_atom_v, p, std::string("cpu"));
  ASSERT_TRUE((msg.match_elements<comm_id_atom, ParallelConfig, std::string>()));
  EXPECT_EQ(msg.get_as<std::string>(2), "cpu");
  const auto& b = msg.get_as<ParallelConfig>(1);
  EXPECT_EQ(b.tensor_parallel_size, 2);
  EXPECT_EQ(b.pipeline_parallel_size, 3);
  EXPECT_EQ(b.communicator_host, "192.168.1.20");
  EXPECT_EQ(b.communicator_secret, "a fresh world secret");
  EXPECT_EQ(b.communicator_id, "");
}

TEST(Serialization, StatsEventRoundTrips) {
  StatsEvent ev;
  ev.scheduler.step = 3;
  ev.scheduler.num_running_reqs = 2;
  ev.scheduler.num_waiting_reqs = 1;
  ev.scheduler.kv_cache_usage = 0.5;
  ev.scheduler.prefix_cache_queries = 64;
  ev.scheduler.prefix_cache_hits = 32;
  ev.scheduler.num_preempted_reqs = 1;
  ev.scheduler.num_scheduled_tokens = 130;
  ev.scheduler.step_seconds = 0.02;
  ev.scheduler.model_seconds = 0.019;
  ev.iteration.num_prompt_tokens = 128;
  ev.iteration.num_generation_tokens = 2;
  ev.iteration.time_to_first_tokens_s = {0.1};
  ev.iteration.inter_token_latencies_s = {0.01, 0.02};
  FinishedRequestStats f;
  f.request_id = "r";
  f.finish_reason = "stop";
  f.num_prompt_tokens = 10;
  f.num_generation_tokens = 5;
  f.e2e_latency_s = 1.5;
  ev.iteration.finished_requests = {f};
  auto b = round_trip(ev);
  EXPECT_EQ(b.scheduler.step, 3);
  EXPECT_EQ(b.scheduler.kv_cache_usage, 0.5);
  EXPECT_EQ(b.scheduler.prefix_cache_hits, 32);
  EXPECT_EQ(b.scheduler.model_seconds, 0.019);
  EXPECT_EQ(b.iteration.num_prompt_tokens, 128);
  EXPECT_EQ(b.iteration.inter_token_latencies_s, ev.iteration.inter_token_latencies_s);
  ASSERT_EQ(b.iteration.finished_requests.size(), 1u);
  EXPECT_EQ(b.iteration.finished_requests[0].finish_reason, "stop");
  EXPECT_EQ(b.iteration.finished_requests[0].e2e_latency_s, 1.5);
  auto msg = message_round_trip(stats_atom_v, ev);
  ASSERT_TRUE((msg.match_elements<stats_atom, StatsEvent>()));
  EXPECT_EQ(msg.get_as<StatsEvent>(1).iteration.num_generation_tokens, 2);
}

TEST(Serialization, CoreOutputsKeepFinishReasonAndStatus) {
  EngineCoreOutputs o;
  engine::RequestOutput r;
  r.request_id = "r";
  r.new_token_ids = {3, 4};
  r.new_text = "héllo";
  r.finished = true;
  r.finish_reason = FinishReason::error;
  r.error = data_loss("model.gguf: truncated");
  o.outputs = {r};
  o.has_stats = true;
  o.num_scheduled_requests = 3;
  o.health = unavailable("rank 1 is gone");
  auto b = round_trip(o);
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_EQ(b.outputs[0].new_text, "héllo");
  EXPECT_EQ(b.outputs[0].finish_reason, FinishReason::error);
  EXPECT_EQ(b.outputs[0].error.code(), StatusCode::data_loss);
  EXPECT_EQ(b.outputs[0].error.message(), "model.gguf: truncated");
  EXPECT_EQ(b.health.code(), StatusCode::unavailable);
  EXPECT_EQ(b.num_scheduled_requests, 3);

  CoreRequest req;
  req.request_id = "x";
  req.prompt_token_ids = {1, 2};
  req.sampling.max_tokens = 9;
  req.seed = 5;
  req.cache_salt = "salt";
  req.pooling = engine::PoolingParams{engine::PoolingType::cls, false, std::nullopt};
  auto rb = round_trip(req);
  ASSERT_TRUE(rb.pooling.has_value());
  EXPECT_EQ(rb.pooling->type, engine::PoolingType::cls);
  EXPECT_EQ(rb.pooling->normalize, false);
  EXPECT_FALSE(rb.pooling->dimensions.has_value());
  req.pooling.reset();
  EXPECT_FALSE(round_trip(req).pooling.has_value());
  EXPECT_EQ(rb.request_id, "x");
  EXPECT_EQ(rb.sampling.max_tokens, 9);
  EXPECT_EQ(rb.seed, 5u);
  EXPECT_EQ(rb.cache_salt, "salt");
}

TEST(Serialization, EveryStatusCodeCrossesAsItsOwnError) {
  for (auto code : {StatusCode::invalid_argument, StatusCode::not_found, StatusCode::not_supported,
                    StatusCode::out_of_range, StatusCode::data_loss, StatusCode::resource_exhausted,
                    StatusCode::unavailable, StatusCode::internal}) {
    SCOPED_TRACE(to_string(code));
    Status s(code, std::string("because ") + to_string(code));
    caf::error err = to_error(s);
    EXPECT_EQ(err.code(), static_cast<uint8_t>(code));  // one to one
    auto back = round_trip(err);
    EXPECT_EQ(back, err);
    Status again = to_status(back);
    EXPECT_EQ(again.code(), code);
    EXPECT_EQ(again.message(), s.message());
    EXPECT_EQ(to_status(back, "rank 3").message(), "rank 3: " + s.message());
    // Rendered for people with the code's name.
    EXPECT_NE(system().render(back).find(to_string(code)), std::string::npos) << system().render(back);
  }
}

TEST(Serialization, CafsOwnErrorsReadAsUnavailable) {
  Status s = to_status(caf::make_error(caf::sec::request_timeout), "rank 1");
  EXPECT_EQ(s.code(), StatusCode::unavailable);
  EXPECT_NE(s.message().find("rank 1: "), std::string::npos);
  EXPECT_NE(s.message().find("timeout"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace troupe::actors
