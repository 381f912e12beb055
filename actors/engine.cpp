// Engine: start-up (plugins → platform → workers → KV sizing → actors),
// request intake with validation, and the synchronous getters.
#include "actors/engine.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <chrono>
#include <future>
#include <map>
#include <random>

#include "actors/engine_actor.hpp"
#include "actors/error_text.hpp"
#include "actors/kv_cache_actor.hpp"
#include "actors/messages.hpp"
#include "actors/plugin_host_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/stat_logger_actor.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/gguf/gguf_file.hpp"
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

/// Adapts a caller's StatsCallback to the actors' event type.
actors::StatsCallback adapt(StatsCallback cb) {
  return [cb = std::move(cb)](const actors::StatsEvent& ev) { cb(StatsEvent{ev.scheduler, ev.iteration}); };
}

std::string most_common_weight_type(const gguf::GgufFile& file) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : file.tensors())
    if (t.n_dims >= 2) bytes[std::string(to_string(t.type))] += t.nbytes;
  std::string best;
  uint64_t most = 0;
  for (const auto& [name, b] : bytes)
    if (b > most) most = b, best = name;
  return best;
}

template <class T>
Result<T> blocking_request(caf::scoped_actor& self, const caf::actor& dest, caf::message msg,
                           const std::string& what) {
  Result<T> out = internal_error(what + ": no answer");
  self->request(dest, kStartTimeout, std::move(msg))
      .receive([&](T& value) { out = std::move(value); },
               [&](caf::error& err) { out = unavailable(what + ": " + actors::error_text(self->system(), err)); });
  return out;
}

}  // namespace

struct Engine::Impl {
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> owned_system;
  caf::actor_system* system = nullptr;
  EngineConfig config;
  ModelInfo model_info;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;
  std::string chat_template_error;
  std::shared_ptr<stats::PrometheusStatLogger> prometheus;
  std::shared_ptr<actors::EngineCounters> counters = std::make_shared<actors::EngineCounters>();
  caf::actor plugin_host, kv_cache, stat_logger, engine, scheduler;
  std::vector<caf::actor> workers;
  int64_t num_blocks = 0;
  std::mutex mu;
  std::mt19937_64 rng;
  uint64_t next_request = 0;
  std::atomic<uint64_t> next_subscription{1};

  ~Impl() {
    for (auto* a : {&engine, &scheduler, &stat_logger, &kv_cache, &plugin_host})
      if (*a) caf::anon_send_exit(*a, caf::exit_reason::user_shutdown);
    for (auto& w : workers) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    // Drop our handles first: a detached actor's thread ends only when its last
    // reference is gone, and the system's destructor waits for those threads.
    engine = scheduler = stat_logger = kv_cache = plugin_host = caf::actor{};
    workers.clear();
    owned_system.reset();
  }
};

void configure_actor_system(caf::actor_system_config& config) {
  // A shared queue whose idle workers block on a condition variable: the
  // default work-stealing workers poll every few microseconds after each
  // message, which preempts the compute threads of a step on a small machine
  // (measured: 2-thread decode 30% slower than 1-thread under work stealing).
  config.set("scheduler.policy", caf::atom("sharing"));
  config.add_message_types<caf::id_block::troupe_actors>();
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
  auto& sys = *impl->system;
  EngineConfig& config = impl->config;
  config = std::move(options.config);
  runtime::register_builtin_models();

  // Plugins and the platform, through this node's plugin-host actor.
  caf::scoped_actor self{sys};
  impl->plugin_host = actors::spawn_plugin_host_actor(sys);
  auto platform_name = blocking_request<std::string>(self, impl->plugin_host, caf::make_message(actors::load_atom_v),
                                                     "loading plugins");
  if (!platform_name) return platform_name.status();
  auto platform = plugin_host::PluginHost::instance().activate_platform();
  if (!platform) return platform.status();

  // The model file, on the engine's side: tokenizer, chat template, limits.
  auto file = gguf::GgufFile::open(config.model.model_path);
  if (!file) return file.status();
  config.model.architecture = (*file)->architecture();
  if (config.model.quantization.empty()) config.model.quantization = most_common_weight_type(**file);
  if (config.model.served_model_name.empty()) {
    std::string p = config.model.model_path;
    auto slash = p.find_last_of('/');
    config.model.served_model_name = slash == std::string::npos ? p : p.substr(slash + 1);
  }
  auto tok = tokenizer::Tokenizer::from_gguf(**file);
  if (!tok) return tok.status();
  impl->tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok).value());
  std::string forced = config.extra.count("chat_template") ? config.extra.at("chat_template") : "";
  auto jinja = (*file)->get_string("tokenizer.chat_template");
  auto tmpl = !forced.empty() ? chat::by_name(forced)
              : jinja         ? chat::detect(*jinja)
                              : Result<chat::ChatTemplate>(not_found("the model file has no chat template; pass --chat-template NAME"));
  if (tmpl) impl->chat_template = *tmpl;
  else impl->chat_template_error = tmpl.status().message();

  if (auto s = (*platform)->check_and_update_config(config); !s) return s;
  if (auto s = (*platform)->verify_quantization(config.model.quantization); !s) return s;

  // Workers (one per rank) on this node.
  for (int rank = 0; rank < config.parallel.tensor_parallel_size; ++rank) {
    auto w = blocking_request<caf::actor>(self, impl->plugin_host,
                                          caf::make_message(actors::worker_atom_v, int32_t{rank}), "spawning a worker");
    if (!w) return w.status();
    impl->workers.push_back(*w);
  }
  for (size_t rank = 0; rank < impl->workers.size(); ++rank) {
    auto reply = blocking_request<actors::WorkerInitReply>(
        self, impl->workers[rank], caf::make_message(actors::init_atom_v, config, static_cast<int32_t>(rank)),
        "loading the model");
    if (!reply) return reply.status();
    if (rank == 0) {
      impl->model_info = reply->info;
      TROUPE_LOG_INFO("Model loading took {:.4f} GiB and {:.3f} seconds ({} on {})",
                      static_cast<double>(reply->info.weight_bytes) / (1 << 30), reply->load_seconds, reply->platform,
                      reply->device_name);
    }
  }
  int64_t ctx = impl->model_info.context_length;
  if (config.model.max_model_len <= 0 || (ctx > 0 && config.model.max_model_len > ctx))
    config.model.max_model_len = ctx > 0 ? ctx : 2048;

  // KV cache sizing through the kv_cache actor.
  impl->kv_cache = actors::spawn_kv_cache_actor(sys);
  {
    Status status = internal_error("KV cache sizing: no answer");
    KvCacheSpec spec;
    self->request(impl->kv_cache, kStartTimeout, actors::size_kv_atom_v, impl->workers, config)
        .receive(
            [&](KvCacheSpec s, int64_t blocks) {
              spec = s;
              impl->num_blocks = blocks;
              status = {};
            },
            [&](caf::error& err) { status = resource_exhausted("KV cache: " + actors::error_text(sys, err)); });
    if (!status) return status;
    config.cache.block_size = spec.block_size;
  }
  for (auto& w : impl->workers) {
    auto ok = blocking_request<bool>(self, w, caf::make_message(actors::warmup_atom_v), "warming up");
    if (!ok) return ok.status();
  }

  // Stats: logging line, Prometheus, plugins; then the engine and the scheduler.
  actors::StatLoggerSetup stat_setup;
  stat_setup.log_interval_s = options.stat_log_interval_s;
  if (options.stat_log_interval_s > 0) stat_setup.loggers.push_back(std::make_unique<stats::LoggingStatLogger>(0));
  impl->prometheus = std::make_shared<stats::PrometheusStatLogger>(config.model.served_model_name, 0);
  impl->prometheus->set_cache_config(impl->num_blocks, config.cache.block_size);
  stat_setup.loggers.push_back(std::make_unique<SharedStatLogger>(impl->prometheus));
  if (options.load_stat_logger_plugins)
    for (auto& l : plugin_host::PluginHost::instance().make_stat_loggers(config, 0))
      stat_setup.loggers.push_back(std::move(l));
  impl->stat_logger = actors::spawn_stat_logger_actor(sys, std::move(stat_setup));

  impl->engine = actors::spawn_engine_actor(sys, {impl->tokenizer, impl->stat_logger, impl->counters});
  actors::SchedulerSetup sched_setup;
  sched_setup.config.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  sched_setup.config.max_num_seqs = config.scheduler.max_num_seqs;
  sched_setup.config.max_model_len = config.model.max_model_len;
  sched_setup.kv_config.num_blocks = static_cast<int32_t>(std::min<int64_t>(impl->num_blocks, INT32_MAX));
  sched_setup.kv_config.block_size = config.cache.block_size;
  sched_setup.kv_config.enable_prefix_caching = config.cache.enable_prefix_caching;
  sched_setup.workers = impl->workers;
  sched_setup.engine = impl->engine;
  sched_setup.eog_ids = impl->tokenizer->eog_ids();
  impl->scheduler = actors::spawn_scheduler_actor(sys, std::move(sched_setup));
  self->send(impl->engine, actors::scheduler_atom_v, impl->scheduler);

  impl->rng.seed(config.model.seed != 0 ? config.model.seed : std::random_device{}());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<std::string> Engine::submit(GenerateRequest request, OutputCallback on_output) {
  auto& im = *impl_;
  if (!healthy()) return unavailable("the engine is unhealthy: " + unhealthy_reason());
  if (auto s = request.sampling.validate(); !s) return s;
  std::vector<int32_t> ids = std::move(request.prompt_token_ids);
  if (ids.empty() && !request.prompt.empty())
    ids = im.tokenizer->encode(request.prompt, request.add_special_tokens, /*parse_special=*/true);
  if (ids.empty()) return invalid_argument("The decoder prompt cannot be empty");
  int64_t vocab = im.tokenizer->vocab_size();
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
  {
    std::lock_guard lock(im.mu);
    sr.request_id = request.request_id.empty() ? "req-" + std::to_string(im.next_request++) : request.request_id;
    sr.seed = request.sampling.seed ? *request.sampling.seed : im.rng();
  }
  sr.prompt_token_ids = std::move(ids);
  sr.sampling = std::move(request.sampling);
  sr.cache_salt = std::move(request.cache_salt);
  sr.on_output = std::move(on_output);
  std::string id = sr.request_id;
  im.counters->in_flight++;
  caf::anon_send(im.engine, actors::submit_atom_v, std::move(sr));
  return id;
}

void Engine::abort(const std::string& request_id) { caf::anon_send(impl_->engine, actors::abort_atom_v, request_id); }

Result<FinalOutput> Engine::generate(GenerateRequest request) {
  auto promise = std::make_shared<std::promise<FinalOutput>>();
  auto acc = std::make_shared<FinalOutput>();
  auto id = submit(std::move(request), [promise, acc](RequestOutput out) {
    accumulate(*acc, out);
    if (out.finished) promise->set_value(*acc);
  });
  if (!id) return id.status();
  auto final_output = promise->get_future().get();
  if (final_output.finish_reason == "error") return unavailable(final_output.error);
  return final_output;
}

uint64_t Engine::subscribe_stats(StatsCallback callback) {
  uint64_t id = impl_->next_subscription++;
  caf::anon_send(impl_->stat_logger, actors::subscribe_atom_v, id, adapt(std::move(callback)));
  return id;
}

void Engine::unsubscribe_stats(uint64_t id) {
  caf::scoped_actor self{*impl_->system};
  self->request(impl_->stat_logger, std::chrono::seconds(10), actors::unsub_atom_v, id)
      .receive([](bool) {}, [](caf::error&) {});  // a stat logger that is gone calls nobody
}
caf::actor Engine::stat_logger() const { return impl_->stat_logger; }
Result<uint16_t> Engine::publish_stat_logger(uint16_t port, const std::string& host) {
  auto& sys = *impl_->system;
  if (!sys.has_middleman())
    return not_supported("the actor system has no middleman; call configure_actor_system() on its config");
  auto published =
      sys.middleman().publish(impl_->stat_logger, port, host.empty() ? nullptr : host.c_str(), /*reuse_addr=*/true);
  if (!published) return unavailable("cannot publish the stat logger on " + host + ":" + std::to_string(port) + ": " +
                                     sys.render(published.error()));
  return *published;
}

caf::actor Engine::engine_actor() const { return impl_->engine; }
std::vector<caf::actor> Engine::worker_actors() const { return impl_->workers; }
caf::actor_system& Engine::system() { return *impl_->system; }
const EngineConfig& Engine::config() const { return impl_->config; }
const ModelInfo& Engine::model_info() const { return impl_->model_info; }
const tokenizer::Tokenizer& Engine::tokenizer() const { return *impl_->tokenizer; }
std::string Engine::served_model_name() const { return impl_->config.model.served_model_name; }
int64_t Engine::num_kv_blocks() const { return impl_->num_blocks; }
int64_t Engine::max_running_requests() const { return impl_->counters->max_running.load(); }
std::string Engine::metrics_text() const { return impl_->prometheus->render(); }

Result<std::string> Engine::apply_chat_template(const std::vector<chat::Message>& messages,
                                                bool add_generation_prompt) const {
  if (!impl_->chat_template) return invalid_argument(impl_->chat_template_error);
  const auto& tok = *impl_->tokenizer;
  std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  std::string eos = tok.eos_id() >= 0 ? tok.token_to_piece(tok.eos_id(), true) : "";
  return chat::apply(*impl_->chat_template, messages, add_generation_prompt, bos, eos);
}

bool Engine::healthy() const { return impl_->counters->healthy.load(); }

std::string Engine::unhealthy_reason() const {
  std::lock_guard lock(impl_->counters->mu);
  return impl_->counters->unhealthy_reason;
}

}  // namespace troupe::engine
