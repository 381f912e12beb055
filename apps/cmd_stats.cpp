// `troupe stats --connect HOST:PORT [--count N] [--timeout S]`: subscribe, from
// another process, to the stat events of an engine whose stat logger is
// published (`troupe serve --stats-port PORT`); prints one JSON line per step.
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "actors/engine_caf.hpp"
#include "actors/gate_actor.hpp"
#include "actors/messages.hpp"
#include "apps/command.hpp"
#include "apps/tls_options.hpp"
#include "net/handshake.hpp"   // read_secret_file
#include "net/link_guard.hpp"  // LinkAuth

namespace troupe::apps {
namespace {

struct Options {
  std::string connect;
  std::string secret_file;
  net::TlsFiles tls;
  int64_t count = 0;      // 0: until the engine goes away
  double timeout_s = 0;   // 0: no limit
};

nlohmann::json to_json(const actors::StatsEvent& ev) {
  const auto& s = ev.scheduler;
  const auto& it = ev.iteration;
  return {{"step", s.step},
          {"running", s.num_running_reqs},
          {"waiting", s.num_waiting_reqs},
          {"kv_cache_usage", s.kv_cache_usage},
          {"prefix_cache_queries", s.prefix_cache_queries},
          {"prefix_cache_hits", s.prefix_cache_hits},
          {"preempted", s.num_preempted_reqs},
          {"scheduled_tokens", s.num_scheduled_tokens},
          {"step_seconds", s.step_seconds},
          {"model_seconds", s.model_seconds},
          {"communicator_seconds", s.communicator_seconds},
          {"communicator_bytes", s.communicator_bytes},
          {"prompt_tokens", it.num_prompt_tokens},
          {"generation_tokens", it.num_generation_tokens},
          {"finished_requests", it.finished_requests.size()},
          {"spec_decode_num_drafts", s.spec_decoding.num_drafts},
          {"spec_decode_num_draft_tokens", s.spec_decoding.num_draft_tokens},
          {"spec_decode_num_accepted_tokens", s.spec_decoding.num_accepted_tokens},
          {"spec_decode_num_accepted_tokens_per_pos", s.spec_decoding.num_accepted_tokens_per_pos}};
}

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe stats: error: %s\n", message.c_str());
  return 1;
}

int run_stats(const Options& o) {
  std::string host;
  uint16_t port = 0;
  if (Status st = actors::parse_host_port(o.connect, "--connect", &host, &port); !st.ok()) return fail(st.message());
  std::string secret;
  if (!o.secret_file.empty()) {
    auto s = net::read_secret_file(o.secret_file);
    if (!s) return fail(s.status().message());
    secret = *s;
  }
  auto tls = net::TlsContext::load(o.tls);
  if (!tls) return fail(tls.status().message());
  caf::actor_system_config cfg;
  engine::configure_actor_system(cfg);
  cfg.set("scheduler.max-threads", size_t{2});
  caf::actor_system system{cfg};
  auto remote = actors::connect_stats(system, host, port, net::LinkAuth(secret, *tls), std::chrono::seconds(10));
  if (!remote) return fail("cannot subscribe at " + o.connect + ": " + remote.status().message());
  std::mutex mu;
  std::condition_variable cv;
  int64_t seen = 0;
  bool gone = false;
  auto printer = system.spawn([&](actors::stats_subscriber_actor::pointer self)
                                  -> actors::stats_subscriber_actor::behavior_type {
    self->monitor(*remote);
    self->set_down_handler([&](caf::down_msg&) {
      std::lock_guard lock(mu);
      gone = true;
      cv.notify_all();
    });
    return {[&](actors::stats_atom, const actors::StatsEvent& ev) {
      std::lock_guard lock(mu);
      if (o.count > 0 && seen >= o.count) return;
      std::cout << to_json(ev).dump() << std::endl;
      ++seen;
      cv.notify_all();
    }};
  });
  caf::anon_send(*remote, actors::subscribe_atom_v, printer);
  std::unique_lock lock(mu);
  auto done = [&] { return gone || (o.count > 0 && seen >= o.count); };
  bool finished = true;
  if (o.timeout_s > 0)
    finished = cv.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)), done);
  else
    cv.wait(lock, done);
  lock.unlock();
  caf::anon_send(*remote, actors::unsub_atom_v, printer);
  caf::anon_send_exit(printer, caf::exit_reason::user_shutdown);
  if (!finished) {
    std::fprintf(stderr, "troupe stats: timed out after %.1f s with %lld events\n", o.timeout_s,
                 static_cast<long long>(seen));
    return 1;
  }
  return 0;
}

const CommandRegistration kRegistration(
    "stats", "Subscribe to a running engine's stat events from another process (JSON lines)", [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("--connect", o->connect, "HOST:PORT of a published stat logger (troupe serve --stats-port)")
          ->required();
      sub.add_option("--secret-file", o->secret_file, "File whose first line is the engine's secret (if it has one)");
      add_tls_options(sub, &o->tls);
      sub.add_option("--count", o->count, "Stop after this many events (default: until the engine stops)");
      sub.add_option("--timeout", o->timeout_s, "Give up after this many seconds (default: no limit)");
      return [o]() { return run_stats(*o); };
    });

}  // namespace
}  // namespace troupe::apps
