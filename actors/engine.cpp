// Engine: start-up in three parts (artifacts; ranks and KV cache; actors),
// request intake with validation, and the synchronous getters.
#include "actors/engine.hpp"

#include "actors/engine_caf.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>

#include "actors/engine_actors.hpp"
#include "actors/engine_replicas.hpp"
#include "actors/gate_actor.hpp"
#include "actors/local_nodes.hpp"
#include "actors/node_supervisor.hpp"
#include "actors/plugin_host_actor.hpp"
#include "actors/ranks.hpp"
#include "actors/status_error.hpp"
#include "net/crypto.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "runtime/core/kv_events/kv_event_publisher.hpp"
#include "runtime/frontend/admission/input_processor.hpp"
#include "runtime/rank/runner/logits_processing.hpp"
#include "runtime/core/engine_core/lora_registry.hpp"
#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/core/stats/logging_stat_logger.hpp"
#include "runtime/core/stats/prometheus_stat_logger.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/log.hpp"
#include "troupe/routing/routing_policy.hpp"
#include "troupe/scheduler_policy.hpp"

namespace troupe::engine {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(600);

/// Lets the stat logger actor own a logger that Engine also reads (Prometheus).
class SharedStatLogger final : public stats::EngineStatLogger {
 public:
  explicit SharedStatLogger(std::shared_ptr<stats::EngineStatLogger> inner) : inner_(std::move(inner)) {}
  void record(const SchedulerStats* s, const IterationStats* i, int e) override { inner_->record(s, i, e); }
  void log() override { inner_->log(); }
  void log_engine_initialized() override { inner_->log_engine_initialized(); }

 private:
  std::shared_ptr<stats::EngineStatLogger> inner_;
};

/// Ask `dest` and wait (bounded); a failure keeps its Status code, with `what` in front.
template <class T, class Handle, class... Ts>
Result<T> ask(caf::scoped_actor& self, const Handle& dest, const std::string& what, Ts&&... xs) {
  Result<T> out = internal_error(what + ": no answer");
  self->request(dest, kStartTimeout, std::forward<Ts>(xs)...)
      .receive([&](T& value) { out = std::move(value); },
               [&](caf::error& err) { out = actors::to_status(err, what); });
  return out;
}

Status lora_off() {
  return not_supported("LoRA is off: start the engine with enable_lora (troupe serve --enable-lora)");
}

Status sleep_mode_off() {
  return not_supported("sleep mode is off: start the engine with enable_sleep_mode (troupe serve --enable-sleep-mode)");
}

}  // namespace

struct Engine::Impl {
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> owned_system;
  caf::actor_system* system = nullptr;
  EngineOptions options;
  EngineConfig config;
  ModelInfo model_info;
  ModelArtifacts artifacts;
  Platform* platform = nullptr;
  KvCachePlan kv_plan;                                // replica 0's (the replicas' agree)
  std::shared_ptr<const SchedulerPolicy> policy;      // of config.scheduler.scheduler_cls
  std::unique_ptr<routing::RoutingPolicy> routing;    // of options.routing_policy, with several replicas
  std::unique_ptr<LogitsProcessorChain> processors;   // this process's, for validate_request only
  std::shared_ptr<stats::PrometheusStatLogger> prometheus;
  std::shared_ptr<OutputRouter> router;               // callers' callbacks, counters, each replica's health
  std::shared_ptr<KvEventPublisher> kv_publisher;     // --kv-events-config
  actors::plugin_host_actor plugin_host;
  actors::EngineActors actors;
  std::unique_ptr<actors::LocalNodes> local_nodes;
  std::vector<actors::node_supervisor_actor> supervisors;  // one per replica on nodes
  actors::stats_gate_actor stats_gate;
  std::unique_ptr<net::LinkGuard> stats_guard;  // the stats port, in front of stats_gate
  std::shared_ptr<const net::TlsContext> tls;   // options' TLS files, loaded; null: none
  mutable std::mutex workers_mu;            // the supervisors replace a replica's workers after a rebuild
  std::vector<actors::ReplicaRanks> replicas;
  std::shared_ptr<LoraRegistry> loras = std::make_shared<LoraRegistry>();
  // Admission; made at the first request, once start-up has fixed the config it reads.
  std::unique_ptr<InputProcessor> input;  // admission, made once the engine started
  std::atomic<uint64_t> next_subscription{1};

  int dp() const { return std::max(1, config.parallel.data_parallel_size); }
  Status load_artifacts();
  Status check_data_parallel();
  Result<std::vector<actors::ReplicaPlace>> place_ranks();
  Status start_ranks();
  void spawn_actors();
  /// Asks every replica's scheduler (sleep, wake-up, LoRA): the first failure, naming its replica.
  template <class T, class... Ts>
  Result<std::vector<T>> ask_all(const std::string& what, Ts... xs);

  ~Impl() {
    auto stop = [](auto& handle) {
      if (handle) caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
      handle = nullptr;
    };
    // Drop our handles: a detached actor's thread ends only when its last
    // reference is gone, and the system's destructor waits for those threads.
    for (auto& s : supervisors) stop(s);
    stats_guard.reset();
    stop(stats_gate);
    stop(actors.router);
    for (auto& s : actors.schedulers) stop(s);
    actors.scheduler = nullptr;
    stop(actors.stat_logger);
    stop(plugin_host);
    for (auto& r : replicas)
      for (auto& w : r.workers) stop(w);
    replicas.clear();
    owned_system.reset();
    local_nodes.reset();  // after the system: the connections to the nodes are closed first
    kv_publisher.reset();
  }
};

template <class T, class... Ts>
Result<std::vector<T>> Engine::Impl::ask_all(const std::string& what, Ts... xs) {
  caf::scoped_actor self{*system};
  std::vector<T> out;
  for (size_t r = 0; r < actors.schedulers.size(); ++r) {
    auto answer = ask<T>(self, actors.schedulers[r], what, xs...);
    if (!answer) {
      if (dp() == 1) return answer.status();
      return Status(answer.status().code(), "replica " + std::to_string(r) + ": " + answer.status().message());
    }
    out.push_back(std::move(answer).value());
  }
  return out;
}

// Part 1: plugins (through this node's plugin-host actor), what the engine reads
// from the model file itself, then the platform that can run it (--device, else
// chosen), and the checks that need no rank.
Status Engine::Impl::load_artifacts() {
  caf::scoped_actor self{*system};
  plugin_host = actors::spawn_plugin_host_actor(*system);
  auto loaded_plugins = ask<std::string>(self, plugin_host, "loading plugins", actors::load_atom_v);
  if (!loaded_plugins) return loaded_plugins.status();
  auto loaded = load_model_artifacts(config);
  if (!loaded) return loaded.status();
  artifacts = std::move(loaded).value();
  if (artifacts.chat_prompt.jinja || artifacts.chat_prompt.builtin)
    TROUPE_LOG_INFO("chat template: {}", artifacts.chat_prompt.origin);
  else if (!artifacts.encoder)
    TROUPE_LOG_WARNING("no chat template: {}", artifacts.chat_prompt.error);
  auto& host = plugin_host::PluginHost::instance();
  plugin_host::PlatformRequest request;
  request.device = config.device;
  request.what = config.model.load_format == "dummy"
                     ? "the dummy " + config.model.model_shape + " model"
                     : std::filesystem::path(config.model.model_path).filename().string();
  request.can_serve = [this](const Platform& p) { return verify_weight_types(p, artifacts); };
  auto activated = host.activate_platform(request);
  if (!activated) return activated.status();
  platform = *activated;
  config.device = *host.activated_platform_name();
  TROUPE_RETURN_IF_ERROR(verify_parallel_config(config, artifacts));
  TROUPE_RETURN_IF_ERROR(platform->check_and_update_config(config));
  // The platform may have chosen the scheduler policy; unknown names fail here,
  // before any rank loads weights.
  auto made = scheduler_policy_registry::create(config.scheduler.scheduler_cls, config);
  if (!made) return made.status();
  policy = std::shared_ptr<const SchedulerPolicy>(std::move(made).value());
  TROUPE_LOG_INFO("scheduler policy: {}", config.scheduler.scheduler_cls);
  if (!config.model.logits_processors.empty() && config.model.runner == "pooling")
    return invalid_argument("logits processors (--logits-processors) apply to generation; model " +
                            config.model.served_model_name + " runs as a pooling model");
  for (const auto& name : config.model.logits_processors) {
    if (logits_processor_registry::is_registered(name)) continue;
    std::string list;
    for (const auto& n : logits_processor_registry::registered_processors()) list += (list.empty() ? "" : ", ") + n;
    return not_found("logits processor '" + name + "' (--logits-processors) is not registered; registered: " +
                     (list.empty() ? "(none)" : list) + " (general plugins register them; is it loaded? see `troupe plugins`)");
  }
  return {};
}

// The checks of --data-parallel-size before anything starts, and the routing policy.
Status Engine::Impl::check_data_parallel() {
  if (config.parallel.data_parallel_size < 1)
    return invalid_argument("--data-parallel-size must be at least 1, not " +
                            std::to_string(config.parallel.data_parallel_size));
  if (dp() == 1) {
    if (options.data_parallel_size_local > 1)
      return invalid_argument("--data-parallel-size-local " + std::to_string(options.data_parallel_size_local) +
                              " exceeds --data-parallel-size 1");
    return {};
  }
  if (config.model.runner == "pooling")
    return invalid_argument("--data-parallel-size " + std::to_string(dp()) +
                            ": replicas serve generation; a pooling model runs as one engine");
  auto made = routing::routing_policy_registry::create(options.routing_policy, config);
  if (!made) return made.status();
  routing = std::move(made).value();
  TROUPE_LOG_INFO("{} replicas, routed by {}", dp(), options.routing_policy);
  return {};
}

// Where every replica's ranks run: the nodes given, local node processes this head starts
// (several ranks, or several replicas, on this host), or this process (one rank).
Result<std::vector<actors::ReplicaPlace>> Engine::Impl::place_ranks() {
  const int world = config.parallel.world_size();
  const int local = options.data_parallel_size_local >= 0 ? options.data_parallel_size_local
                    : options.nodes.empty()                ? dp()
                                                           : 0;
  if (dp() == 1 && !options.nodes.empty()) {
    if (options.nodes.size() > static_cast<size_t>(world))
      TROUPE_LOG_WARNING("{} nodes given for {} rank(s): the last {} stay idle", options.nodes.size(), world,
                         options.nodes.size() - static_cast<size_t>(world));
    std::vector<std::string> used(options.nodes.begin(),
                                  options.nodes.begin() + std::min(options.nodes.size(), static_cast<size_t>(world)));
    return std::vector<actors::ReplicaPlace>{{used, false}};
  }
  std::vector<std::string> local_addresses;
  const int local_processes = dp() > 1 || world > 1 ? local * world : 0;
  if (local_processes > 0) {
    auto exe = actors::LocalNodes::find_executable(options.node_executable);
    if (!exe) return exe.status();
    auto started = actors::LocalNodes::start(*exe, local_processes, std::chrono::minutes(2));
    if (!started) return started.status();
    local_nodes = std::move(started).value();
    local_addresses = local_nodes->addresses();
  }
  return actors::place_replicas(dp(), local, world, local_addresses, options.nodes);
}

// Part 2, per replica: its nodes, a worker per rank with the model loaded, its KV cache
// (engine::set_up_kv_cache), the replicas at once; then what the engine takes from them.
Status Engine::Impl::start_ranks() {
  auto places = place_ranks();
  if (!places) return places.status();
  std::vector<std::future<Result<actors::ReplicaRanks>>> starting;
  for (int r = 0; r < dp(); ++r) {
    actors::ReplicaStart start;
    start.index = r;
    start.config = config;
    start.place = (*places)[static_cast<size_t>(r)];
    // Local node processes (loopback, a fresh secret) run without TLS.
    start.auth = start.place.local ? net::LinkAuth(local_nodes->secret())
                                   : net::LinkAuth(options.node_secret, tls);
    start.own_plugin_host = plugin_host;
    start.timeout = kStartTimeout;
    starting.push_back(std::async(std::launch::async, [this, start = std::move(start)]() mutable {
      return actors::start_replica(*system, std::move(start), dp());
    }));
  }
  Status first_failure;
  for (auto& f : starting) {
    auto started = f.get();
    if (!started) {
      if (first_failure.ok()) first_failure = started.status();
      continue;
    }
    std::lock_guard lock(workers_mu);
    replicas.push_back(std::move(started).value());
  }
  if (!first_failure.ok()) return first_failure;
  const auto& first = replicas.front().first_reply;
  model_info = first.info;
  TROUPE_LOG_INFO("Model loading took {:.4f} GiB and {:.3f} seconds ({} on {})",
                  static_cast<double>(model_info.weight_bytes) / (1 << 30), first.load_seconds, first.platform,
                  first.device_name);
  if (model_info.vocab_size < artifacts.tokenizer->vocab_size())
    return data_loss(config.model.model_path + ": the tokenizer has " +
                     std::to_string(artifacts.tokenizer->vocab_size()) + " tokens but the model only " +
                     std::to_string(model_info.vocab_size));
  kv_plan = replicas.front().kv_plan;
  config.cache.block_size = kv_plan.spec.block_size;
  config.model.max_model_len = kv_plan.max_model_len;
  for (const auto& r : replicas) {  // admission takes what every replica can hold
    if (r.kv_plan.spec.block_size != kv_plan.spec.block_size)
      return internal_error("replica " + std::to_string(r.index) + " planned blocks of " +
                            std::to_string(r.kv_plan.spec.block_size) + " tokens, replica 0 of " +
                            std::to_string(kv_plan.spec.block_size));
    config.model.max_model_len = std::min(config.model.max_model_len, r.kv_plan.max_model_len);
  }
  auto chain = LogitsProcessorChain::create(config, model_info.vocab_size, artifacts.tokenizer);
  if (!chain) return chain.status();
  processors = std::move(chain).value();
  if (!processors->empty()) {
    std::string names;
    for (const auto& n : processors->names()) names += (names.empty() ? "" : ", ") + n;
    TROUPE_LOG_INFO("logits processors: {}", names);
  }
  return {};
}

// Part 3: stats (logging line per replica, Prometheus, plugins), the router and a
// scheduler per replica, the KV event publisher, and a supervisor per replica on nodes.
void Engine::Impl::spawn_actors() {
  actors::EngineActorsSetup setup;
  setup.config = config;
  setup.tokenizer = artifacts.tokenizer;
  router = std::make_shared<OutputRouter>(dp());
  setup.router = router;
  setup.step_timeout = options.step_timeout;
  setup.policy = policy;
  for (const auto& r : replicas) setup.replicas.push_back({r.workers, r.rank_places(dp()), r.kv_plan});
  setup.routing_policy = std::move(routing);
  setup.routing_policy_name = options.routing_policy;
  setup.kv_publisher = kv_publisher;
  setup.stat_loggers.log_interval_s = options.stat_log_interval_s;
  // One of each logger per replica (vLLM makes its loggers per engine), behind one
  // dispatcher by engine index; Prometheus labels every replica's series itself.
  std::vector<std::unique_ptr<stats::EngineStatLogger>> logging;
  std::vector<std::vector<std::unique_ptr<stats::EngineStatLogger>>> plugins;  // [plugin][replica]
  for (int r = 0; r < dp(); ++r) {
    if (options.stat_log_interval_s > 0) logging.push_back(std::make_unique<stats::LoggingStatLogger>(r));
    if (!options.load_stat_logger_plugins) continue;
    auto made = plugin_host::PluginHost::instance().make_stat_loggers(config, r);
    plugins.resize(std::max(plugins.size(), made.size()));
    for (size_t k = 0; k < made.size(); ++k) {
      plugins[k].resize(static_cast<size_t>(r) + 1);
      plugins[k][static_cast<size_t>(r)] = std::make_unique<stats::PluginStatLogger>(std::move(made[k]));
    }
  }
  auto& loggers = setup.stat_loggers.loggers;
  if (!logging.empty()) loggers.push_back(std::make_unique<stats::PerEngineStatLogger>(std::move(logging)));
  prometheus = std::make_shared<stats::PrometheusStatLogger>(config.model.served_model_name, dp());
  prometheus->set_cache_config(kv_plan.num_blocks, kv_plan.spec.block_size);
  loggers.push_back(std::make_unique<SharedStatLogger>(prometheus));
  for (auto& by_engine : plugins) loggers.push_back(std::make_unique<stats::PerEngineStatLogger>(std::move(by_engine)));
  actors = actors::spawn_engine_actors(*system, std::move(setup));
  for (auto& replica : replicas) {
    if (replica.place.nodes.empty()) continue;
    actors::NodeSupervisorSetup sup;
    sup.addresses = replica.place.nodes;
    sup.auth = replica.auth;
    sup.layout = replica.layout;
    sup.config = replica.config;
    sup.plan = replica.kv_plan;
    sup.scheduler = actors.schedulers[static_cast<size_t>(replica.index)];
    sup.on_rebuilt = [this, r = static_cast<size_t>(replica.index)](const std::vector<actors::worker_actor>& rebuilt) {
      std::lock_guard lock(workers_mu);
      replicas[r].workers = rebuilt;
    };
    supervisors.push_back(actors::spawn_node_supervisor(*system, std::move(sup)));
  }
}

void configure_actor_system(caf::actor_system_config& config) {
  // A shared queue whose idle workers block on a condition variable: the
  // default work-stealing workers poll every few microseconds after each
  // message, which preempts the compute threads of a step on a small machine
  // (measured: 2-thread decode 30% slower than 1-thread under work stealing).
  config.set("scheduler.policy", caf::atom("sharing"));
  config.add_message_types<caf::id_block::troupe_actors>();
  actors::add_status_error_category(config);
  config.load<caf::io::middleman>();
  // A stopped peer (SIGSTOP, a hung host) is noticed only through heartbeats:
  // without them its connection looks alive forever (STACK.md).
  config.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(200)});
  config.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(2)});
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::start(EngineOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.system) {
    impl->system = options.system;
  } else {
    impl->caf_config = std::make_unique<caf::actor_system_config>();
    size_t threads = options.caf_threads > 0 ? static_cast<size_t>(options.caf_threads) : 4;
    impl->caf_config->set("scheduler.max-threads", threads);
    configure_actor_system(*impl->caf_config);
    impl->owned_system = std::make_unique<caf::actor_system>(*impl->caf_config);
    impl->system = impl->owned_system.get();
  }
  impl->config = std::move(options.config);
  impl->options = std::move(options);
  {
    auto tls = net::TlsContext::load(
        {impl->options.tls_cert_file, impl->options.tls_key_file, impl->options.tls_ca_file});
    if (!tls.ok()) return tls.status();
    impl->tls = std::move(*tls);
  }
  runtime::register_builtin_models();
  TROUPE_RETURN_IF_ERROR(impl->load_artifacts());
  TROUPE_RETURN_IF_ERROR(impl->check_data_parallel());
  if (impl->options.kv_events.publishes()) {
    // Before any rank starts: a port in use stops start-up at once.
    auto publisher = make_zmq_kv_event_publisher(impl->options.kv_events, impl->dp(),
                                                 [loras = impl->loras](int64_t id) {
                                                   for (const auto& a : loras->list())
                                                     if (a.id == id) return a.name;
                                                   return std::string();
                                                 });
    if (!publisher) return publisher.status();
    impl->kv_publisher = std::move(publisher).value();
  }
  TROUPE_RETURN_IF_ERROR(impl->start_ranks());
  impl->spawn_actors();
  {
    // Admission: the seeds of requests without one come from the model's seed, else at random.
    InputProcessorSetup setup;
    setup.config = impl->config;
    setup.model_info = impl->model_info;
    setup.tokenizer = impl->artifacts.tokenizer;
    setup.policy = impl->policy;
    setup.processors = impl->processors.get();
    setup.loras = impl->loras;
    setup.seeds.seed(impl->config.model.seed != 0 ? impl->config.model.seed : std::random_device{}());
    impl->input = std::make_unique<InputProcessor>(std::move(setup));
  }
  auto modules = impl->options.lora_modules;
  std::unique_ptr<Engine> engine(new Engine(std::move(impl)));
  for (const auto& [name, path] : modules) {
    auto loaded = engine->load_lora_adapter(name, path);
    if (!loaded.ok()) return Status(loaded.status().code(), "--lora-modules " + name + "=" + path + ": " +
                                                                loaded.status().message());
  }
  return engine;
}

Result<std::string> Engine::submit(GenerateRequest request, OutputCallback on_output, std::string* refused_field) {
  auto& im = *impl_;
  if (refused_field) refused_field->clear();
  if (!healthy()) return unavailable("the engine is unhealthy: " + unhealthy_reason());
  auto admitted = im.input->process(std::move(request), im.router->in_flight(), refused_field);
  if (!admitted) return admitted.status();
  if (const int32_t pin = admitted->request.data_parallel_rank; pin >= 0 && im.dp() > 1) {
    const Status health = im.router->replica_health()[static_cast<size_t>(pin)];
    if (!health.ok())
      return unavailable("replica " + std::to_string(pin) + " (X-data-parallel-rank) does not serve: " + health.message());
  }
  if (auto lease = std::move(admitted->lora)) {
    // Released before the caller sees the last delta: by then the scheduler has
    // forgotten the request, and the caller may unload the adapter at once.
    on_output = [lease, inner = std::move(on_output)](RequestOutput out) {
      if (out.finished) lease->release();
      inner(std::move(out));
    };
  }
  std::string id = admitted->request.request_id;
  // The callback first: the scheduler's outputs (or its refusal) go to the router.
  im.router->add(id, std::move(on_output));
  // With replicas the router actor picks the scheduler; a pin to a replica that does not
  // serve ends there, through the OutputRouter, with the reason.
  if (im.actors.router) caf::anon_send(im.actors.router, actors::submit_atom_v, std::move(admitted->request));
  else caf::anon_send(im.actors.scheduler, actors::submit_atom_v, std::move(admitted->request));
  return id;
}

void Engine::abort(const std::string& request_id) {
  // An id the scheduler does not know (finished, or never submitted) is a no-op there.
  if (impl_->actors.router) caf::anon_send(impl_->actors.router, actors::abort_atom_v, request_id);
  else caf::anon_send(impl_->actors.scheduler, actors::abort_atom_v, request_id);
}

Result<FinalOutput> Engine::generate(GenerateRequest request) {
  auto promise = std::make_shared<std::promise<FinalOutput>>();
  auto acc = std::make_shared<FinalOutput>();
  auto id = submit(std::move(request), [promise, acc](RequestOutput out) {
    accumulate(*acc, out);
    if (out.finished) promise->set_value(*acc);
  });
  if (!id) return id.status();
  auto final_output = promise->get_future().get();
  if (final_output.finish_reason == FinishReason::error) return final_output.error;
  return final_output;
}

uint64_t Engine::subscribe_stats(StatsCallback callback) {
  uint64_t id = impl_->next_subscription++;
  caf::anon_send(impl_->actors.stat_logger, actors::subscribe_atom_v, id, std::move(callback));
  return id;
}

void Engine::unsubscribe_stats(uint64_t id) {
  caf::scoped_actor self{*impl_->system};
  self->request(impl_->actors.stat_logger, std::chrono::seconds(10), actors::unsub_atom_v, id)
      .receive([](bool) {}, [](caf::error&) {});  // a stat logger that is gone calls nobody
}
Result<int64_t> Engine::sleep(int level) {
  if (!impl_->config.model.enable_sleep_mode)
    return sleep_mode_off();
  auto freed = impl_->ask_all<int64_t>("sleep", actors::sleep_atom_v, static_cast<int32_t>(level));
  if (!freed) return freed.status();
  int64_t total = 0;
  for (int64_t bytes : *freed) total += bytes;
  return total;
}

Status Engine::wake_up(const std::vector<std::string>& tags) {
  if (!impl_->config.model.enable_sleep_mode) return sleep_mode_off();
  for (const std::string& t : tags)
    if (t != "weights" && t != "kv_cache")
      return invalid_argument("wake_up tag '" + t + "' is unknown (weights, kv_cache)");
  auto r = impl_->ask_all<bool>("wake_up", actors::wake_atom_v, tags);
  return r.ok() ? Status{} : r.status();
}

Result<LoraAdapterInfo> Engine::load_lora_adapter(const std::string& name, const std::string& path) {
  auto& im = *impl_;
  if (!im.config.lora.enable_lora) return lora_off();
  auto info = im.loras->begin_load(name, path, im.config.model.served_model_name);
  if (!info) return info.status();
  auto added = im.ask_all<bool>("load_lora_adapter " + name, actors::lora_add_atom_v, info->id, path);
  if (!added.ok() && im.dp() > 1)  // the replicas that took it drop it again (an unknown id is refused: ignored)
    (void)im.ask_all<bool>("unload_lora_adapter " + name, actors::lora_rm_atom_v, info->id);
  TROUPE_RETURN_IF_ERROR(im.loras->finish_load(*info, added.status()));
  TROUPE_LOG_INFO("LoRA adapter '{}' (id {}) loaded from {}", name, info->id, path);
  return info;
}

Status Engine::unload_lora_adapter(const std::string& name) {
  auto& im = *impl_;
  if (!im.config.lora.enable_lora) return lora_off();
  const LoraRegistry::Unload unload = im.loras->begin_unload(name);
  switch (unload.outcome) {
    case LoraRegistry::UnloadOutcome::unknown:
      return not_found("The lora adapter '" + name + "' cannot be found.");
    case LoraRegistry::UnloadOutcome::in_use:
      return unavailable("unload_lora_adapter " + name + ": LoRA adapter " + std::to_string(unload.info.id) +
                         " is in use by " + std::to_string(unload.users) + " unfinished request(s)");
    case LoraRegistry::UnloadOutcome::started:
      break;
  }
  auto removed = im.ask_all<bool>("unload_lora_adapter " + name, actors::lora_rm_atom_v, unload.info.id);
  im.loras->finish_unload(name);
  if (!removed.ok()) return removed.status();
  TROUPE_LOG_INFO("LoRA adapter '{}' (id {}) unloaded", name, unload.info.id);
  return {};
}

std::vector<LoraAdapterInfo> Engine::lora_adapters() const { return impl_->loras->list(); }

int Engine::sleep_level() const {
  caf::scoped_actor self{*impl_->system};
  auto r = ask<int32_t>(self, impl_->actors.scheduler, "is_sleeping", actors::sleeping_atom_v);
  return r.ok() ? *r : 0;
}

Result<uint16_t> Engine::publish_stat_logger(uint16_t port, const std::string& host, const std::string& secret) {
  auto& im = *impl_;
  auto& sys = *im.system;
  if (!sys.has_middleman())
    return not_supported("the actor system has no middleman; call configure_actor_system() on its config");
  const net::LinkAuth auth(secret, im.tls);
  if (!auth.authenticates() && !actors::is_loopback_host(host))
    return invalid_argument("publishing stat events on " + (host.empty() ? std::string("every interface") : host) +
                            " needs a secret (--secret-file) or TLS (--tls-cert/--tls-key/--tls-ca): anyone could "
                            "subscribe otherwise");
  if (im.stats_gate) caf::anon_send_exit(im.stats_gate, caf::exit_reason::user_shutdown);
  im.stats_gate = actors::spawn_stats_gate(sys, im.actors.stat_logger, secret);
  im.stats_guard.reset();
  auto guard = actors::publish_guarded(sys, im.stats_gate, host, port, auth);
  if (!guard.ok())
    return unavailable("cannot publish the stat logger on " + host + ":" + std::to_string(port) + ": " +
                       guard.status().message());
  im.stats_guard = std::move(*guard);
  return im.stats_guard->port();
}

struct EngineInternals {
  static const Engine::Impl& of(const Engine& engine) { return *engine.impl_; }
};

actors::stat_logger_actor stat_logger(const Engine& engine) { return EngineInternals::of(engine).actors.stat_logger; }
std::vector<actors::worker_actor> worker_actors(const Engine& engine) {
  const auto& im = EngineInternals::of(engine);
  std::lock_guard lock(im.workers_mu);
  std::vector<actors::worker_actor> out;
  for (const auto& r : im.replicas) out.insert(out.end(), r.workers.begin(), r.workers.end());
  return out;
}
caf::actor_system& Engine::system() { return *impl_->system; }
const EngineConfig& Engine::config() const { return impl_->config; }
const ModelInfo& Engine::model_info() const { return impl_->model_info; }
const tokenizer::Tokenizer& Engine::tokenizer() const { return *impl_->artifacts.tokenizer; }
std::string Engine::served_model_name() const { return impl_->config.model.served_model_name; }
bool Engine::serves_model(const std::string& name) const {
  const ModelConfig& m = impl_->config.model;
  if (name.empty() || name == m.served_model_name) return true;
  return std::find(m.served_model_aliases.begin(), m.served_model_aliases.end(), name) != m.served_model_aliases.end();
}
int64_t Engine::num_kv_blocks() const { return impl_->kv_plan.num_blocks; }
int64_t Engine::max_running_requests() const { return impl_->router->max_running(); }
std::string Engine::metrics_text() const {
  std::string text = impl_->prometheus->render();
  // The stats port's link guard (--stats-port): its refusals by cause.
  if (impl_->stats_guard) {
    text += "# HELP troupe:link_refusals_total Connections the stats port's link guard refused, by cause.\n"
            "# TYPE troupe:link_refusals_total counter\n";
    for (const auto& [cause, n] : impl_->stats_guard->refusals())
      text += fmt::format("troupe:link_refusals_total{{cause=\"{}\"}} {}\n", cause, n);
  }
  return text;
}

Result<std::string> Engine::render_chat(const chat::ChatPromptRequest& request) const {
  return chat::render_chat_prompt(impl_->artifacts.chat_prompt, request);
}

Result<std::string> Engine::apply_chat_template(const std::vector<chat::Message>& messages,
                                                bool add_generation_prompt, bool continue_final_message) const {
  chat::ChatPromptRequest r;
  for (const auto& m : messages) r.messages.push_back({{"role", m.role}, {"content", m.content}});
  r.add_generation_prompt = add_generation_prompt;
  r.continue_final_message = continue_final_message;
  return render_chat(r);
}

std::string Engine::chat_template_origin() const {
  const auto& p = impl_->artifacts.chat_prompt;
  return p.jinja || p.builtin ? p.origin : p.error;
}

bool Engine::healthy() const { return impl_->router->healthy(); }

int Engine::data_parallel_size() const { return impl_->dp(); }

std::vector<Status> Engine::replica_health() const { return impl_->router->replica_health(); }

std::string Engine::unhealthy_reason() const { return impl_->router->unhealthy_reason(); }

}  // namespace troupe::engine
