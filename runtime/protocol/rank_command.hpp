// The one thing the engine asks of every rank of a model: a RankCommand, run
// by each rank (engine::Rank) and answered with a RankReply. Start-up, KV
// sizing and allocation, warm-up, steps, sleep mode and LoRA are alternatives
// of one variant, so every all-ranks feature travels through one collective
// call (Executor::collective, vLLM's collective_rpc with types) and one worker
// message. Plain data: each command lists its fields with `fields(f)`, which is
// all actors/serialization.hpp needs to move it between processes.
//
// Adding an all-ranks command: a struct here (kName, kWhat, Reply, fields), its
// alternative at the end of RankCommand::Op (and its Reply in RankReply::Value
// if new), and its handler in rank.cpp. Nothing in actors/ changes.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "runtime/protocol/worker_protocol.hpp"
#include "troupe/attention.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// A reply that carries nothing but success.
struct Done {
  static constexpr const char* kName = "Done";
  template <class F>
  auto fields(F&& f) { return f(); }
};

/// Make the platform's worker for the rank and load the model (must come first).
struct LoadModel {
  static constexpr const char* kName = "LoadModel";
  static constexpr const char* kWhat = "loading the model";
  using Reply = WorkerInitReply;
  EngineConfig config;
  template <class F>
  auto fields(F&& f) { return f(config); }
};

/// The KV geometry the rank's model needs and the bytes the rank can give it.
struct SizeKvCache {
  static constexpr const char* kName = "SizeKvCache";
  static constexpr const char* kWhat = "sizing the KV cache";
  using Reply = KvSizing;
  template <class F>
  auto fields(F&& f) { return f(); }
};

/// Allocate the KV cache the engine planned.
struct AllocateKvCache {
  static constexpr const char* kName = "AllocateKvCache";
  static constexpr const char* kWhat = "allocating the KV cache";
  using Reply = Done;
  KvCacheSpec spec;
  int64_t num_blocks = 0;
  template <class F>
  auto fields(F&& f) { return f(spec, num_blocks); }
};

struct WarmUp {
  static constexpr const char* kName = "WarmUp";
  static constexpr const char* kWhat = "warming up";
  using Reply = Done;
  template <class F>
  auto fields(F&& f) { return f(); }
};

/// One step; only the driver rank answers with sampled tokens.
struct ExecuteStep {
  static constexpr const char* kName = "ExecuteStep";
  static constexpr const char* kWhat = "the step";
  using Reply = StepOutput;
  StepInput input;
  template <class F>
  auto fields(F&& f) { return f(input); }
};

/// Sleep mode: the reply is the resident bytes the rank's process freed.
struct Sleep {
  static constexpr const char* kName = "Sleep";
  static constexpr const char* kWhat = "going to sleep";
  using Reply = int64_t;
  int32_t level = 1;
  template <class F>
  auto fields(F&& f) { return f(level); }
};

/// Wake the parts named by `tags` ("weights", "kv_cache"; empty: all).
struct WakeUp {
  static constexpr const char* kName = "WakeUp";
  static constexpr const char* kWhat = "waking up";
  using Reply = Done;
  std::vector<std::string> tags;
  template <class F>
  auto fields(F&& f) { return f(tags); }
};

/// Read the adapter file at `path` on the rank's own host and hand it to the worker.
struct AddLora {
  static constexpr const char* kName = "AddLora";
  static constexpr const char* kWhat = "loading the LoRA adapter";
  using Reply = Done;
  int64_t lora_id = 0;
  std::string path;
  template <class F>
  auto fields(F&& f) { return f(lora_id, path); }
};

struct RemoveLora {
  static constexpr const char* kName = "RemoveLora";
  static constexpr const char* kWhat = "removing the LoRA adapter";
  using Reply = Done;
  int64_t lora_id = 0;
  template <class F>
  auto fields(F&& f) { return f(lora_id); }
};

/// What every rank runs. The order of the alternatives is the wire format (a head and its
/// nodes run the same build); a command the engine never sends is not kept here.
struct RankCommand {
  using Op = std::variant<LoadModel, SizeKvCache, AllocateKvCache, WarmUp, ExecuteStep, Sleep, WakeUp, AddLora,
                          RemoveLora>;
  Op op;

  RankCommand() = default;
  template <class Command>
    requires(!std::is_same_v<std::decay_t<Command>, RankCommand> && std::is_constructible_v<Op, Command>)
  RankCommand(Command c) : op(std::move(c)) {}  // NOLINT: a command is a RankCommand
  /// "the step", "loading the model", ...: how failures and time-outs name it.
  const char* what() const {
    return std::visit([](const auto& c) { return std::decay_t<decltype(c)>::kWhat; }, op);
  }
};

/// What a rank answered. Every command's Reply is one alternative.
struct RankReply {
  using Value = std::variant<Done, WorkerInitReply, KvSizing, StepOutput, int64_t>;
  Value value;

  RankReply() = default;
  template <class Reply>
    requires(!std::is_same_v<std::decay_t<Reply>, RankReply> && std::is_constructible_v<Value, Reply>)
  RankReply(Reply r) : value(std::move(r)) {}  // NOLINT: a reply is a RankReply
};

/// The reply of `Command` out of `reply`: internal_error when a rank answered with another type.
template <class Command>
Result<typename Command::Reply> reply_as(RankReply reply) {
  using Reply = typename Command::Reply;
  if (auto* r = std::get_if<Reply>(&reply.value)) return std::move(*r);
  return internal_error(std::string("a rank answered ") + Command::kName + " with the wrong reply type");
}

}  // namespace troupe::engine
