// Engine: start-up in three parts (artifacts; ranks and KV cache; actors),
// request intake with validation, and the synchronous getters.
#include "actors/engine.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <chrono>
#include <future>
#include <random>

#include "actors/engine_actors.hpp"
#include "actors/kv_cache_actor.hpp"
#include "actors/plugin_host_actor.hpp"
#include "actors/status_error.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/engine/model_artifacts.hpp"
#include "runtime/models/builtin_models.hpp"
#include "runtime/stats/logging_stat_logger.hpp"
#include "runtime/stats/prometheus_stat_logger.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "troupe/log.hpp"

namespace troupe::engine {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(600);

/// Lets the stat logger actor own a logger that Engine also reads (Prometheus).
class SharedStatLogger final : public StatLogger {
 public:
  explicit SharedStatLogger(std::shared_ptr<StatLogger> inner) : inner_(std::move(inner)) {}
  void record(const SchedulerStats* s, const IterationStats* i, int e) override { inner_->record(s, i, e); }
  void log() override { inner_->log(); }
  void log_engine_initialized() override { inner_->log_engine_initialized(); }

 private:
  std::shared_ptr<StatLogger> inner_;
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

}  // namespace

struct Engine::Impl {
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> owned_system;
  caf::actor_system* system = nullptr;
  EngineConfig config;
  ModelInfo model_info;
  ModelArtifacts artifacts;
  Platform* platform = nullptr;
  KvCachePlan kv_plan;
  std::shared_ptr<stats::PrometheusStatLogger> prometheus;
  std::shared_ptr<actors::EngineCounters> counters = std::make_shared<actors::EngineCounters>();
  actors::plugin_host_actor plugin_host;
  actors::kv_cache_actor kv_cache;
  actors::EngineActors actors;
  std::vector<actors::worker_actor> workers;
  std::mutex mu;
  std::mt19937_64 rng;
  uint64_t next_request = 0;
  std::atomic<uint64_t> next_subscription{1};

  Status load_artifacts();
  Status start_ranks();
  void spawn_actors(const EngineOptions& options);

  ~Impl() {
    auto stop = [](auto& handle) {
      if (handle) caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
      handle = nullptr;
    };
    // Drop our handles: a detached actor's thread ends only when its last
    // reference is gone, and the system's destructor waits for those threads.
    stop(actors.engine);
    stop(actors.scheduler);
    stop(actors.stat_logger);
    stop(kv_cache);
    stop(plugin_host);
    for (auto& w : workers) stop(w);
    workers.clear();
    owned_system.reset();
  }
};

// Part 1: plugins and the platform (through this node's plugin-host actor),
// then what the engine reads from the model file itself.
Status Engine::Impl::load_artifacts() {
  caf::scoped_actor self{*system};
  plugin_host = actors::spawn_plugin_host_actor(*system);
  auto platform_name = ask<std::string>(self, plugin_host, "loading plugins", actors::load_atom_v);
  if (!platform_name) return platform_name.status();
  auto activated = plugin_host::PluginHost::instance().activate_platform();
  if (!activated) return activated.status();
  platform = *activated;
  auto loaded = load_model_artifacts(config);
  if (!loaded) return loaded.status();
  artifacts = std::move(loaded).value();
  TROUPE_RETURN_IF_ERROR(platform->check_and_update_config(config));
  return verify_weight_types(*platform, artifacts);
}

// Part 2: one worker per rank loads the model; the kv_cache actor sizes the
// cache over every rank (engine::plan_kv_cache) and has it allocated; warm-up.
Status Engine::Impl::start_ranks() {
  caf::scoped_actor self{*system};
  for (int32_t rank = 0; rank < config.parallel.tensor_parallel_size; ++rank) {
    auto w = ask<actors::worker_actor>(self, plugin_host, "spawning the worker of rank " + std::to_string(rank),
                                       actors::worker_atom_v, rank);
    if (!w) return w.status();
    workers.push_back(*w);
  }
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    auto reply = ask<WorkerInitReply>(self, workers[rank], "loading the model on rank " + std::to_string(rank),
                                      actors::init_atom_v, config, static_cast<int32_t>(rank));
    if (!reply) return reply.status();
    if (rank == 0) {
      model_info = reply->info;
      TROUPE_LOG_INFO("Model loading took {:.4f} GiB and {:.3f} seconds ({} on {})",
                      static_cast<double>(reply->info.weight_bytes) / (1 << 30), reply->load_seconds, reply->platform,
                      reply->device_name);
    }
  }
  if (model_info.vocab_size < artifacts.tokenizer->vocab_size())
    return data_loss(config.model.model_path + ": the tokenizer has " +
                     std::to_string(artifacts.tokenizer->vocab_size()) + " tokens but the model only " +
                     std::to_string(model_info.vocab_size));
  kv_cache = actors::spawn_kv_cache_actor(*system);
  auto plan = ask<KvCachePlan>(self, kv_cache, "KV cache", actors::size_kv_atom_v, workers, config,
                               model_info.context_length);
  if (!plan) return plan.status();
  kv_plan = *plan;
  config.cache.block_size = kv_plan.spec.block_size;
  config.model.max_model_len = kv_plan.max_model_len;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    auto ok = ask<bool>(self, workers[rank], "warming up rank " + std::to_string(rank), actors::warmup_atom_v);
    if (!ok) return ok.status();
  }
  return {};
}

// Part 3: stats (logging line, Prometheus, plugins), engine and scheduler actors.
void Engine::Impl::spawn_actors(const EngineOptions& options) {
  actors::EngineActorsSetup setup;
  setup.config = config;
  setup.kv_plan = kv_plan;
  setup.tokenizer = artifacts.tokenizer;
  setup.workers = workers;
  setup.counters = counters;
  setup.stat_loggers.log_interval_s = options.stat_log_interval_s;
  if (options.stat_log_interval_s > 0)
    setup.stat_loggers.loggers.push_back(std::make_unique<stats::LoggingStatLogger>(0));
  prometheus = std::make_shared<stats::PrometheusStatLogger>(config.model.served_model_name, 0);
  prometheus->set_cache_config(kv_plan.num_blocks, kv_plan.spec.block_size);
  setup.stat_loggers.loggers.push_back(std::make_unique<SharedStatLogger>(prometheus));
  if (options.load_stat_logger_plugins)
    for (auto& l : plugin_host::PluginHost::instance().make_stat_loggers(config, 0))
      setup.stat_loggers.loggers.push_back(std::move(l));
  actors = actors::spawn_engine_actors(*system, std::move(setup));
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
  runtime::register_builtin_models();
  TROUPE_RETURN_IF_ERROR(impl->load_artifacts());
  TROUPE_RETURN_IF_ERROR(impl->start_ranks());
  impl->spawn_actors(options);
  impl->rng.seed(impl->config.model.seed != 0 ? impl->config.model.seed : std::random_device{}());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<std::string> Engine::submit(GenerateRequest request, OutputCallback on_output) {
  auto& im = *impl_;
  if (!healthy()) return unavailable("the engine is unhealthy: " + unhealthy_reason());
  if (auto s = request.sampling.validate(); !s) return s;
  std::vector<int32_t> ids = std::move(request.prompt_token_ids);
  if (ids.empty() && !request.prompt.empty())
    ids = im.artifacts.tokenizer->encode(request.prompt, request.add_special_tokens, /*parse_special=*/true);
  if (ids.empty()) return invalid_argument("The decoder prompt cannot be empty");
  int64_t vocab = im.artifacts.tokenizer->vocab_size();
  if (im.model_info.vocab_size > 0) vocab = std::min<int64_t>(vocab, im.model_info.vocab_size);
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      return out_of_range("token id " + std::to_string(id) + " is out of vocabulary (size " + std::to_string(vocab) + ")");
  int64_t max_len = im.config.model.max_model_len;
  int64_t prompt_len = static_cast<int64_t>(ids.size());
  if (prompt_len + request.sampling.max_tokens > max_len)
    return out_of_range("This model's maximum context length is " + std::to_string(max_len) +
                        " tokens. However, you requested " + std::to_string(prompt_len + request.sampling.max_tokens) +
                        " tokens (" + std::to_string(prompt_len) + " in the messages, " +
                        std::to_string(request.sampling.max_tokens) +
                        " in the completion). Please reduce the length of the messages or completion.");
  int64_t queued_cap = im.config.scheduler.max_num_queued_requests;
  if (queued_cap > 0 && im.counters->in_flight.load() >= im.config.scheduler.max_num_seqs + queued_cap)
    return resource_exhausted("the engine's waiting queue is full (" + std::to_string(queued_cap) +
                              " queued requests); retry later");
  actors::SubmitRequest sr;
  CoreRequest& core = sr.request;
  {
    std::lock_guard lock(im.mu);
    core.request_id = request.request_id.empty() ? "req-" + std::to_string(im.next_request++) : request.request_id;
    core.seed = request.sampling.seed ? *request.sampling.seed : im.rng();
  }
  core.prompt_token_ids = std::move(ids);
  core.sampling = std::move(request.sampling);
  core.cache_salt = std::move(request.cache_salt);
  sr.on_output = std::move(on_output);
  std::string id = core.request_id;
  im.counters->in_flight++;
  caf::anon_send(im.actors.engine, actors::submit_atom_v, std::move(sr));
  return id;
}

void Engine::abort(const std::string& request_id) {
  caf::anon_send(impl_->actors.engine, actors::abort_atom_v, request_id);
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
actors::stat_logger_actor Engine::stat_logger() const { return impl_->actors.stat_logger; }
Result<uint16_t> Engine::publish_stat_logger(uint16_t port, const std::string& host) {
  auto& sys = *impl_->system;
  if (!sys.has_middleman())
    return not_supported("the actor system has no middleman; call configure_actor_system() on its config");
  auto published =
      sys.middleman().publish(impl_->actors.stat_logger, port, host.empty() ? nullptr : host.c_str(), /*reuse_addr=*/true);
  if (!published) return unavailable("cannot publish the stat logger on " + host + ":" + std::to_string(port) + ": " +
                                     sys.render(published.error()));
  return *published;
}

actors::engine_actor Engine::engine_actor() const { return impl_->actors.engine; }
std::vector<actors::worker_actor> Engine::worker_actors() const { return impl_->workers; }
caf::actor_system& Engine::system() { return *impl_->system; }
const EngineConfig& Engine::config() const { return impl_->config; }
const ModelInfo& Engine::model_info() const { return impl_->model_info; }
const tokenizer::Tokenizer& Engine::tokenizer() const { return *impl_->artifacts.tokenizer; }
std::string Engine::served_model_name() const { return impl_->config.model.served_model_name; }
int64_t Engine::num_kv_blocks() const { return impl_->kv_plan.num_blocks; }
int64_t Engine::max_running_requests() const { return impl_->counters->max_running.load(); }
std::string Engine::metrics_text() const { return impl_->prometheus->render(); }

Result<std::string> Engine::apply_chat_template(const std::vector<chat::Message>& messages,
                                                bool add_generation_prompt) const {
  const auto& a = impl_->artifacts;
  if (!a.chat_template) return invalid_argument(a.chat_template_error);
  const auto& tok = *a.tokenizer;
  std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  std::string eos = tok.eos_id() >= 0 ? tok.token_to_piece(tok.eos_id(), true) : "";
  return chat::apply(*a.chat_template, messages, add_generation_prompt, bos, eos);
}

bool Engine::healthy() const { return impl_->counters->healthy.load(); }

std::string Engine::unhealthy_reason() const {
  std::lock_guard lock(impl_->counters->mu);
  return impl_->counters->unhealthy_reason;
}

}  // namespace troupe::engine
