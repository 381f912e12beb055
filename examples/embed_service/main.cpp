// embed_service: a C++ service that embeds troupe.
//   embed_service MODEL.gguf
// It creates its own caf::actor_system, starts an engine inside it, streams
// the tokens of three requests, cancels one of them midway, and listens to
// the engine's stat events twice: as a C++ callback and as an actor.
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "actors/engine_caf.hpp"
#include "actors/messages.hpp"

namespace {

struct Tally {
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::map<std::string, std::string> text, reason;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  // 1. Our own actor system, prepared for troupe's messages.
  caf::actor_system_config cfg;
  troupe::engine::configure_actor_system(cfg);
  caf::actor_system system{cfg};

  // 2. An engine inside it.
  troupe::engine::EngineOptions options;
  options.system = &system;
  options.config.model.model_path = argv[1];
  options.stat_log_interval_s = 0;  // this service does its own reporting
  auto started = troupe::engine::Engine::start(std::move(options));
  if (!started) {
    std::fprintf(stderr, "engine failed to start: %s\n", started.status().to_string().c_str());
    return 1;
  }
  auto& engine = **started;

  // 3. Stat events: a C++ callback and an actor.
  std::atomic<int64_t> generated_by_callback{0};
  engine.subscribe_stats([&](const troupe::engine::StatsEvent& ev) {
    generated_by_callback += ev.iteration.num_generation_tokens;
  });
  auto actor_steps = std::make_shared<std::atomic<int64_t>>(0);
  auto watcher = system.spawn([actor_steps](troupe::actors::stats_subscriber_actor::pointer)
                                  -> troupe::actors::stats_subscriber_actor::behavior_type {
    return {[actor_steps](troupe::actors::stats_atom, const troupe::actors::StatsEvent&) { ++*actor_steps; }};
  });
  caf::anon_send(troupe::engine::stat_logger(engine), troupe::actors::subscribe_atom_v, watcher);

  // 4. Three streamed requests; the second is cancelled after a few tokens.
  Tally tally;
  std::string to_cancel;
  std::atomic<bool> cancel_sent{false};
  const char* prompts[] = {"Once upon a time", "The little dog", "One day, Lily"};
  for (int i = 0; i < 3; ++i) {
    troupe::engine::GenerateRequest req;
    req.request_id = "embed-" + std::to_string(i);
    req.prompt = prompts[i];
    req.sampling.temperature = 0;
    req.sampling.max_tokens = i == 1 ? 500 : 32;
    req.sampling.ignore_eos = i == 1;
    auto id = engine.submit(req, [&, i](troupe::engine::RequestOutput out) {
      std::lock_guard lock(tally.mu);
      tally.text[out.request_id] += out.new_text;
      if (i == 1 && out.num_generated_tokens >= 8 && !cancel_sent.exchange(true))
        engine.abort(out.request_id);  // cancelling from inside a callback is fine: it is a message
      if (out.finished) {
        tally.reason[out.request_id] = to_string(out.finish_reason);
        ++tally.finished;
        tally.cv.notify_all();
      }
    });
    if (!id) {
      std::fprintf(stderr, "submit failed: %s\n", id.status().to_string().c_str());
      return 1;
    }
  }
  {
    std::unique_lock lock(tally.mu);
    if (!tally.cv.wait_for(lock, std::chrono::minutes(5), [&] { return tally.finished == 3; })) {
      std::fprintf(stderr, "requests did not finish in time\n");
      return 1;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the last stat events arrive

  bool ok = true;
  for (auto& [id, text] : tally.text) std::printf("%s [%s]:%s\n", id.c_str(), tally.reason[id].c_str(), text.c_str());
  ok &= tally.reason["embed-1"] == "abort";
  ok &= tally.reason["embed-0"] != "abort" && tally.reason["embed-2"] != "abort";
  std::printf("stat events: %lld generated tokens seen by the callback, %lld steps seen by the actor\n",
              static_cast<long long>(generated_by_callback.load()), static_cast<long long>(actor_steps->load()));
  ok &= generated_by_callback.load() > 0 && actor_steps->load() > 0;
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
  started->reset();  // stop the engine before our actor system goes away
  std::printf("%s\n", ok ? "embed_service: OK" : "embed_service: FAILED");
  return ok ? 0 : 1;
}
