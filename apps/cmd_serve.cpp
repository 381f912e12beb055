// `troupe serve [MODEL]`: the OpenAI-compatible HTTP server, with the flags of
// `vllm serve`. The port opens first (/health answers 503 while the model
// loads); SIGINT/SIGTERM stop it cleanly.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "actors/engine.hpp"
#include "plugin_host/plugin_host.hpp"
#include "apps/node_options.hpp"
#include "apps/command.hpp"
#include "apps/data_parallel_options.hpp"
#include "apps/default_model.hpp"
#include "apps/load_format_options.hpp"
#include "apps/policy_options.hpp"
#include "apps/speculative_options.hpp"
#include "apps/vllm_compat_options.hpp"
#include "runtime/frontend/openai/reasoning_parsers.hpp"
#include "runtime/frontend/openai/tool_parsers.hpp"
#include "apps/serve/api_server.hpp"
#include "apps/serve/http_listener.hpp"
#include "troupe/log.hpp"

namespace troupe::apps {
namespace {

struct Options {
  std::string model;
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_name;  // vLLM: NAME [NAME...]; the first is reported
  int64_t max_model_len = 0;
  int max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int block_size = 16;
  bool enable_prefix_caching = true;
  std::string api_key;
  bool disable_log_stats = false;
  double shutdown_timeout = 0;  // s: how long SIGTERM waits for requests in flight (0: abort them)
  int64_t max_num_queued_requests = 0;
  std::string chat_template;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;
  uint64_t max_body_bytes = 1u << 20;
  size_t max_connections = 0;  // 0: derived from RLIMIT_NOFILE (http_listener.hpp)
  int64_t num_gpu_blocks_override = 0;
  uint64_t seed = 0;
  int stats_port = 0;  // 0: stat events are not published
  std::string stats_host = "127.0.0.1";
  bool log_requests = false;
  std::string runner = "auto";
  std::string io_processor_plugin;
  bool enable_sleep_mode = false;
  double sleep_wait_timeout = 60;  // s: the longest a request waits while the engine sleeps
  bool enable_lora = false;
  std::vector<std::string> lora_modules;  // name=path
  int max_loras = 1;
  int max_lora_rank = 16;
  LoadFormatOptions load;
  PolicyOptions policy;
  std::string speculative_config;  // --speculative-config JSON
  double structured_compile_timeout_s = 1.0;
  int64_t structured_max_memory_mib = 256;
  double structured_mask_timeout_ms = 50;
  PlacementOptions placement;
  DataParallelOptions data_parallel;
  VllmCompatOptions vllm;  // vLLM's flags answered by name (accepted or refused)
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe serve: error: %s\n", message.c_str());
  return 1;
}

// The auto tool choice and reasoning parsers the flags name (vLLM: auto tool choice needs
// a registered parser), checked before anything loads.
Status check_parsers(const Options& o) {
  if (o.enable_auto_tool_choice) {
    if (o.tool_call_parser.empty()) return invalid_argument("--enable-auto-tool-choice requires --tool-call-parser");
    auto parser = openai::make_tool_parser(o.tool_call_parser);
    if (!parser.ok()) return parser.status();
  }
  if (!o.reasoning_parser.empty()) {
    auto parser = openai::make_reasoning_parser(o.reasoning_parser);
    if (!parser.ok())
      return invalid_argument("--reasoning-parser " + o.reasoning_parser + ": " + parser.status().message());
  }
  return {};
}

// The model to load: the argument, the default model, or "" with --load-format dummy.
Result<std::string> model_path(const Options& o) {
  const std::string model = o.load.dummy() ? "" : o.model.empty() ? default_model_path() : o.model;
  if (!o.load.dummy() && !std::filesystem::exists(model)) {
    if (o.model.empty())
      return not_found("the default model " + model + " is missing; run scripts/fetch-model.sh to download it");
    return not_found("model file not found: " + model);
  }
  return model;
}

// Step 1, before anything starts: the option groups into the engine's config, the
// parsers, the model file, the server's flags, the API key, the secret and TLS files.
Status check_options(Options& o, engine::EngineOptions* eo, std::string* model, std::string* secret) {
  auto& c = eo->config;
  TROUPE_RETURN_IF_ERROR(apply_vllm_compat_options(o.vllm, o.model));
  TROUPE_RETURN_IF_ERROR(apply_load_format(o.load, o.model, &c.model));
  TROUPE_RETURN_IF_ERROR(apply_policy_options(o.policy, &c));
  TROUPE_RETURN_IF_ERROR(apply_speculative_options(o.speculative_config, &c));
  TROUPE_RETURN_IF_ERROR(apply_data_parallel_options(o.data_parallel, eo));
  TROUPE_RETURN_IF_ERROR(check_parsers(o));
  auto path = model_path(o);
  if (!path.ok()) return path.status();
  *model = std::move(path).value();
  if (o.port <= 0 || o.port > 65535) return invalid_argument("--port must be in 1..65535");
  if (o.max_body_bytes < 1024) return invalid_argument("--max-body-bytes must be at least 1024");
  if (!(o.structured_compile_timeout_s > 0) || o.structured_compile_timeout_s > 3600)
    return invalid_argument("--structured-outputs-compile-timeout-s must be in (0, 3600] seconds");
  if (o.structured_max_memory_mib < 1 || o.structured_max_memory_mib > (int64_t{1} << 20))
    return invalid_argument("--structured-outputs-max-memory-mib must be in [1, 1048576]");
  if (!(o.structured_mask_timeout_ms >= 0) || o.structured_mask_timeout_ms > 600000)
    return invalid_argument("--structured-outputs-mask-timeout-ms must be in [0, 600000] (0: no limit)");
  // The soft descriptor limit rises to the hard one; the connection cap stays below it.
  const auto budget = apps::serve::raise_descriptor_limit();
  if (o.max_connections == 0) o.max_connections = budget.default_max_connections;
  TROUPE_RETURN_IF_ERROR(apps::serve::check_max_connections(o.max_connections, /*probe_slots=*/32, budget));
  if (!(o.sleep_wait_timeout > 0) || o.sleep_wait_timeout > 86400)
    return invalid_argument("--sleep-wait-timeout must be in (0, 86400] seconds");
  if (o.api_key.empty())
    if (const char* k = std::getenv("TROUPE_API_KEY"); k && *k) o.api_key = k;
  TROUPE_RETURN_IF_ERROR(read_optional_secret(o.placement.secret_file, secret));
  if (auto tls = net::TlsContext::load(o.placement.tls); !tls.ok()) return tls.status();
  return {};
}

// Step 2: the HTTP server's options (it opens before the model loads).
apps::serve::ServeOptions serve_options(const Options& o, const std::string& model) {
  apps::serve::ServeOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  so.max_body_bytes = o.max_body_bytes;
  so.max_connections = o.max_connections;
  so.model_path = o.load.dummy() ? "dummy:" + o.load.model_shape : model;
  so.log_requests = o.log_requests;
  if (o.enable_auto_tool_choice) so.tool_call_parser = o.tool_call_parser;
  so.reasoning_parser = o.reasoning_parser;
  return so;
}

// LoRA: the settings and the adapters to load at start (name=path).
Status add_lora_options(const Options& o, engine::EngineOptions* eo) {
  auto& lora = eo->config.lora;
  lora.enable_lora = o.enable_lora;
  lora.max_loras = o.max_loras;
  lora.max_lora_rank = o.max_lora_rank;
  for (const std::string& m : o.lora_modules) {
    const size_t eq = m.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == m.size())
      return invalid_argument("--lora-modules takes name=path, got '" + m + "'");
    eo->lora_modules.emplace_back(m.substr(0, eq), m.substr(eq + 1));
  }
  if (!o.enable_lora && !eo->lora_modules.empty()) return invalid_argument("--lora-modules needs --enable-lora");
  if (o.max_loras < 1 || o.max_lora_rank < 1)
    return invalid_argument("--max-loras and --max-lora-rank must be at least 1");
  return {};
}

// Step 3: the rest of the engine's options from the flags (step 1 applied the option groups).
Status fill_engine_options(const Options& o, const std::string& model, const std::string& secret,
                           engine::EngineOptions* eo) {
  auto& c = eo->config;
  c.model.model_path = model;
  if (!o.served_model_name.empty()) {
    c.model.served_model_name = o.served_model_name.front();
    c.model.served_model_aliases.assign(o.served_model_name.begin() + 1, o.served_model_name.end());
  }
  c.model.quantization = o.vllm.quantization;
  c.model.generation_config = o.vllm.generation_config.empty() ? "auto" : o.vllm.generation_config;
  c.model.max_model_len = o.max_model_len;
  c.model.seed = o.seed;
  c.model.runner = o.runner;
  c.model.enable_sleep_mode = o.enable_sleep_mode;
  c.model.sleep_wait_timeout_s = o.sleep_wait_timeout;
  TROUPE_RETURN_IF_ERROR(add_lora_options(o, eo));
  c.cache.block_size = o.block_size;
  c.cache.enable_prefix_caching = o.enable_prefix_caching;
  c.cache.num_gpu_blocks_override = o.num_gpu_blocks_override;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.scheduler.max_num_queued_requests = o.max_num_queued_requests;
  c.structured_outputs.compile_timeout_s = o.structured_compile_timeout_s;
  c.structured_outputs.max_memory_mib = o.structured_max_memory_mib;
  c.structured_outputs.mask_timeout_ms = o.structured_mask_timeout_ms;
  apply_placement(o.placement, &c);
  if (!o.chat_template.empty()) c.extra["chat_template"] = o.chat_template;
  eo->stat_log_interval_s = o.disable_log_stats ? 0.0 : 5.0;
  TROUPE_RETURN_IF_ERROR(parse_nodes(o.placement.nodes, &eo->nodes));
  eo->node_secret = secret;
  eo->tls_cert_file = o.placement.tls.cert;
  eo->tls_key_file = o.placement.tls.key;
  eo->tls_ca_file = o.placement.tls.ca;
  return {};
}

// Step 4: the engine (plugins, the model on every rank, the KV cache, warm-up).
Result<std::unique_ptr<engine::Engine>> start_engine(const engine::EngineOptions& eo) {
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = engine::Engine::start(eo);
  if (!engine.ok()) return engine.status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& cfg = (*engine)->config();
  TROUPE_LOG_INFO("Engine ready in {:.2f} s: model '{}', max_model_len {}, KV cache {} blocks x {} tokens = {} tokens",
                  seconds, (*engine)->served_model_name(), cfg.model.max_model_len, (*engine)->num_kv_blocks(),
                  cfg.cache.block_size, (*engine)->num_kv_blocks() * cfg.cache.block_size);
  return engine;
}

// --stats-port: the stat logger published for `troupe stats --connect`.
Status publish_stats(const Options& o, engine::Engine& engine, const std::string& secret) {
  if (o.stats_port <= 0) return {};
  auto port = engine.publish_stat_logger(static_cast<uint16_t>(o.stats_port),
                                         o.stats_host == "0.0.0.0" ? "" : o.stats_host, secret);
  if (!port.ok()) return port.status();
  TROUPE_LOG_INFO("Publishing stat events on {}:{} (subscribe with: troupe stats --connect HOST:{}{})", o.stats_host,
                  *port, *port,
                  std::string(secret.empty() ? "" : " --secret-file FILE") +
                      (o.placement.tls.any() ? " --tls-cert C --tls-key K --tls-ca CA" : ""));
  return {};
}

// The IO processor plugin POST /pooling goes through: the flag's, else the one the model
// folder's config names, if any.
Status attach_io_processor(const Options& o, const EngineConfig& cfg, apps::serve::ApiServer& server) {
  std::string name = o.io_processor_plugin;
  if (name.empty() && cfg.extra.count("io_processor_plugin")) name = cfg.extra.at("io_processor_plugin");
  if (name.empty()) return {};
  auto io = plugin_host::PluginHost::instance().make_io_processor(name, cfg);
  if (!io.ok()) return io.status();
  if (cfg.model.runner != "pooling")
    return invalid_argument("--io-processor-plugin needs a pooling model (--runner pooling); this one runs as " +
                            cfg.model.runner);
  TROUPE_LOG_INFO("POST /pooling goes through the IO processor plugin {}", name);
  server.set_io_processor(name, std::shared_ptr<IOProcessor>(std::move(*io)));
  return {};
}

// SIGINT/SIGTERM (the server's signal handler) set it; the main thread waits for it.
class ShutdownLatch {
 public:
  void request() {
    std::lock_guard lock(mu_);
    requested_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return requested_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;
};

// Stop taking requests; let those in flight finish for up to --shutdown-timeout, then
// cut the rest (aborted in the engine; a stream ends with finish_reason "abort", an error
// event and [DONE]), let those last words reach the clients, and close.
void drain_and_close(apps::serve::ApiServer& server, double shutdown_timeout) {
  server.drain();
  size_t left = server.in_flight();
  TROUPE_LOG_INFO("Shutting down: new requests are refused; {} in flight{}", left,
                  left && shutdown_timeout > 0 ? fmt::format(", waiting up to {} s for them", shutdown_timeout)
                                               : std::string());
  const auto drain_end = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(shutdown_timeout * 1000));
  while (left > 0 && std::chrono::steady_clock::now() < drain_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = server.in_flight();
  }
  if (left > 0) {
    TROUPE_LOG_WARNING("aborting {} request(s) still in flight", left);
    server.cut_in_flight(shutdown_timeout > 0
                             ? fmt::format("the server is shutting down: --shutdown-timeout of {} s passed",
                                           shutdown_timeout)
                             : std::string("the server is shutting down (--shutdown-timeout 0)"));
  }
  if (!server.wait_answers_written(std::chrono::seconds(2)))
    TROUPE_LOG_WARNING("some answers were not written within 2 s; closing anyway");
  server.stop();
  TROUPE_LOG_INFO("HTTP server closed; stopping the engine");
}

// A stuck actor must not keep a stopped server alive forever: give the engine a bounded
// time to stop, then leave with an error.
void stop_engine(std::unique_ptr<engine::Engine>& engine) {
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(15), [&] { return stopped; })) {
      TROUPE_LOG_ERROR("the engine did not stop within 15 s; exiting anyway");
      std::_Exit(3);
    }
  });
  engine.reset();
  {
    std::lock_guard lock(mu);
    stopped = true;
    cv.notify_all();
  }
  watchdog.join();
}

int run_serve(Options o) {
  engine::EngineOptions eo;
  std::string model, secret;
  if (Status st = check_options(o, &eo, &model, &secret); !st.ok()) return fail(st.message());
  ShutdownLatch shutdown;
  apps::serve::ApiServer server(serve_options(o, model));
  if (Status st = server.start([&shutdown] { shutdown.request(); }); !st.ok()) return fail(st.message());
  TROUPE_LOG_INFO("HTTP server listening on http://{}:{} (/health answers 503 until the model is loaded)", o.host,
                  o.port);
  auto stop_and_fail = [&server](const std::string& message) {
    server.stop();
    return fail(message);
  };
  if (Status st = fill_engine_options(o, model, secret, &eo); !st.ok()) return stop_and_fail(st.message());
  auto engine = start_engine(eo);
  if (!engine.ok()) return stop_and_fail(engine.status().to_string());
  if (!o.api_key.empty()) TROUPE_LOG_INFO("API key authentication is on for /v1/*, /tokenize and /detokenize");
  if (Status st = publish_stats(o, **engine, secret); !st.ok()) return stop_and_fail(st.message());
  if (Status st = attach_io_processor(o, (*engine)->config(), server); !st.ok()) return stop_and_fail(st.message());
  server.set_engine(engine->get());
  TROUPE_LOG_INFO("Starting API server on http://{}:{}", o.host, o.port);
  shutdown.wait();
  drain_and_close(server, o.shutdown_timeout);
  stop_engine(*engine);
  TROUPE_LOG_INFO("Shutdown complete");
  return 0;
}

const CommandRegistration kRegistration(
    "serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("model", o->model,
                     std::string("GGUF model file or Hugging Face model folder (default: $TROUPE_MODEL_CACHE/") +
                         kDefaultModelName + "; none with --load-format dummy)");
      add_load_format_options(sub, &o->load);
      add_policy_options(sub, &o->policy);
      add_speculative_options(sub, &o->speculative_config);
      sub.add_option("--io-processor-plugin", o->io_processor_plugin,
                     "IO processor plugin (troupe.io_processor_plugins) that POST /pooling goes through");
      sub.add_option("--runner", o->runner,
                     "generate or pooling (embeddings: /v1/embeddings, /pooling, /score); default: from the model");
      sub.add_option("--host", o->host, "Address to listen on (default 0.0.0.0)");
      sub.add_option("--port", o->port, "Port to listen on (default 8000)");
      sub.add_option("--served-model-name", o->served_model_name,
                     "Model names in the API, NAME [NAME...]: the first is reported, all are accepted in \"model\" "
                     "(default: a GGUF file's name, a folder's path as given)")
          ->expected(1, -1);
      sub.add_option("--max-model-len", o->max_model_len, "Context length (default: the model's)");
      sub.add_option("--max-num-seqs", o->max_num_seqs, "Most sequences in one step (default 256)");
      sub.add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Most tokens in one step (default 2048)");
      sub.add_option("--block-size", o->block_size, "Tokens per KV cache block (default 16)");
      sub.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o->enable_prefix_caching,
                   "Reuse KV blocks of shared prompt prefixes (default on)");
      sub.add_flag("--enable-sleep-mode", o->enable_sleep_mode,
                   "POST /sleep?level=1|2, POST /wake_up, GET /is_sleeping: free the model's memory while idle");
      sub.add_option("--sleep-wait-timeout", o->sleep_wait_timeout,
                     "Seconds a request may wait while the engine sleeps before it fails with 503 (default 60)");
      sub.add_flag("--enable-lora", o->enable_lora,
                   "Serve LoRA adapters (GGUF, llama.cpp's format): POST /v1/load_lora_adapter, "
                   "/v1/unload_lora_adapter; a request picks one by its model name");
      sub.add_option("--lora-modules", o->lora_modules, "LoRA adapters to load at start: name=path [name=path ...]");
      sub.add_option("--max-loras", o->max_loras, "Distinct LoRA adapters in one step (default 1)");
      sub.add_option("--max-lora-rank", o->max_lora_rank, "Largest LoRA rank accepted (default 16)");
      sub.add_option("--structured-outputs-compile-timeout-s", o->structured_compile_timeout_s,
                     "Longest compile of one structured output's schema or grammar, seconds (default 1); longer is a "
                     "400 naming the limit");
      sub.add_option("--structured-outputs-max-memory-mib", o->structured_max_memory_mib,
                     "Most memory one compiled schema or grammar may hold, MiB (default 256); more is a 400 naming "
                     "the limit");
      sub.add_option("--structured-outputs-mask-timeout-ms", o->structured_mask_timeout_ms,
                     "Longest computation of one token mask, ms (default 50; 0: none); longer fails that request "
                     "alone, naming the limit, so a heavy grammar cannot hold its neighbours' steps");
      sub.add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' (also $TROUPE_API_KEY)");
      sub.add_flag("--disable-log-stats", o->disable_log_stats, "No periodic throughput/KV log line");
      sub.add_option("--shutdown-timeout", o->shutdown_timeout,
                     "Seconds SIGTERM/SIGINT waits for requests in flight before aborting them (0: abort at once); "
                     "new requests are refused meanwhile")
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--max-num-queued-requests", o->max_num_queued_requests,
                     "Waiting requests beyond which new ones get 503 (default 0: unbounded)");
      sub.add_option("--chat-template", o->chat_template,
                     "Chat template instead of the model's: a Jinja file, a Jinja string, or a built-in name "
                     "(chatml, smollm2, llama3, mistral, gemma, ...); checked at start-up");
      sub.add_flag("--enable-auto-tool-choice", o->enable_auto_tool_choice,
                   "tool_choice \"auto\": parse tool calls out of the model's text (needs --tool-call-parser)");
      sub.add_option("--tool-call-parser", o->tool_call_parser,
                     "The parser of auto tool choice: hermes, llama3_json, mistral or pythonic");
      sub.add_option("--reasoning-parser", o->reasoning_parser,
                     "Split chat answers into reasoning_content and content: deepseek_r1 or qwen3 (<think> models)");
      sub.add_option("--max-body-bytes", o->max_body_bytes,
                     "Largest request body; larger ones get 413 from their Content-Length, unread (default 1 MiB)");
      sub.add_option("--max-connections", o->max_connections,
                     "Open HTTP connections at most; more get 503 while /health still answers (default: from "
                     "RLIMIT_NOFILE, raised to its hard limit at start)");
      sub.add_option("--num-gpu-blocks-override", o->num_gpu_blocks_override, "Use exactly this many KV blocks");
      sub.add_option("--seed", o->seed, "Engine random seed (request seeds; dummy weights)");
      sub.add_option("--stats-port", o->stats_port,
                     "Publish the stat logger on this port so other processes can subscribe (troupe stats)");
      sub.add_option("--stats-host", o->stats_host,
                     "Address for --stats-port (default 127.0.0.1; others need --secret-file or --tls-*)");
      add_placement_options(sub, &o->placement);
      add_data_parallel_options(sub, &o->data_parallel);
      sub.add_flag("--log-requests,--enable-log-requests", o->log_requests, "Log one line per HTTP request");
      add_vllm_compat_options(sub, &o->vllm);
      return [o]() { return run_serve(*o); };
    });

}  // namespace
}  // namespace troupe::apps
