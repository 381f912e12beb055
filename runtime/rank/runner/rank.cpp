#include "runtime/rank/runner/rank.hpp"

#include <utility>

namespace troupe::engine {
namespace {

template <class T>
Result<RankReply> reply(Result<T> r) {
  if (!r) return r.status();
  return RankReply(std::move(r).value());
}

Result<RankReply> reply(const Status& s) {
  if (!s) return s;
  return RankReply(Done{});
}

// One handler per command of a loaded rank (LoadModel is Rank::run's own).
Result<RankReply> handle(WorkerRunner& r, SizeKvCache&) { return reply(r.kv_sizing()); }
Result<RankReply> handle(WorkerRunner& r, AllocateKvCache& c) { return reply(r.initialize_cache(c.spec, c.num_blocks)); }
Result<RankReply> handle(WorkerRunner& r, WarmUp&) { return reply(r.warm_up()); }
Result<RankReply> handle(WorkerRunner& r, ExecuteStep& c) { return reply(r.execute(std::move(c.input))); }
Result<RankReply> handle(WorkerRunner& r, Sleep& c) { return reply(r.sleep(c.level)); }
Result<RankReply> handle(WorkerRunner& r, WakeUp& c) { return reply(r.wake_up(c.tags)); }
Result<RankReply> handle(WorkerRunner& r, AddLora& c) { return reply(r.add_lora(c.lora_id, c.path)); }
Result<RankReply> handle(WorkerRunner& r, RemoveLora& c) { return reply(r.remove_lora(c.lora_id)); }

}  // namespace

Result<RankReply> Rank::run(RankCommand command) {
  if (auto* load = std::get_if<LoadModel>(&command.op)) {
    auto runner = WorkerRunner::create(*platform_, load->config, rank_);
    if (!runner) return runner.status();
    runner_ = std::move(runner).value();
    return RankReply(runner_->init_reply());
  }
  if (!runner_) return unavailable("the worker has no model loaded (init first)");
  return std::visit(
      [this](auto& c) -> Result<RankReply> {
        if constexpr (std::is_same_v<std::decay_t<decltype(c)>, LoadModel>) return internal_error("unreachable");
        else return handle(*runner_, c);
      },
      command.op);
}

}  // namespace troupe::engine
