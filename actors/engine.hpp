// The C++ embedding API: start an engine (inside your caf::actor_system or
// one troupe makes), submit requests, receive tokens as a stream, cancel,
// and subscribe to stat events. Behind it: plugin_host, worker, scheduler and
// stat_logger actors, and the OutputRouter that hands each request's outputs to
// its callback (docs/engine.md). This header includes
// no CAF; programs that talk to the engine's actors themselves (actor
// subscribers, their own actor system) include actors/engine_caf.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/engine_core/engine_core.hpp"
#include "runtime/core/kv_events/kv_events_config.hpp"
#include "runtime/text/chat/chat_prompt.hpp"
#include "runtime/text/chat/chat_template.hpp"
#include "runtime/protocol/request_types.hpp"
#include "runtime/config/engine_config.hpp"
#include "troupe/model.hpp"
#include "runtime/core/stats/engine_stats.hpp"
#include "troupe/status.hpp"

namespace caf {
class actor_system;
}  // namespace caf

namespace troupe::tokenizer {
class Tokenizer;
}

namespace troupe::engine {

struct EngineOptions {
  EngineConfig config;
  /// Run the engine's actors in this system (the caller keeps it alive longer
  /// than the Engine). Null: the engine creates and owns one.
  caf::actor_system* system = nullptr;
  /// Threads of the actor system troupe creates (0: CAF's default, capped at 4).
  int caf_threads = 0;
  /// Seconds between periodic stat-logger log() calls; <= 0 disables the logging line.
  double stat_log_interval_s = 5.0;
  /// Load stat-logger plugins (troupe.stat_logger_plugins) into the stat logger.
  bool load_stat_logger_plugins = true;
  /// Worker nodes (`troupe node`) as "HOST:PORT"; ranks are placed over them in
  /// order (consecutive ranks share a node). Empty: one rank runs in this
  /// process; several ranks run in local node processes the engine starts.
  std::vector<std::string> nodes;
  /// The secret the nodes ask for (their --secret-file); empty: none.
  std::string node_secret;
  /// Mutual TLS (--tls-cert, --tls-key, --tls-ca: PEM files of this process's certificate,
  /// its key and the cluster CA) on the links to `nodes` and on the stats port; all empty:
  /// none. Local node processes (no `nodes`) are on loopback with a fresh secret, no TLS.
  std::string tls_cert_file, tls_key_file, tls_ca_file;
  /// The troupe CLI that local node processes run (default: LocalNodes::find_executable).
  std::string node_executable;
  /// A rank that does not answer a step within this fails it.
  std::chrono::milliseconds step_timeout = std::chrono::minutes(10);
  /// LoRA adapters to load at start (vLLM's --lora-modules name=path); needs config.lora.enable_lora.
  std::vector<std::pair<std::string, std::string>> lora_modules;
  /// With config.parallel.data_parallel_size N > 1: how many replicas run on this host, in
  /// local node processes (vLLM's --data-parallel-size-local); the others share `nodes`.
  /// -1: all of them when `nodes` is empty, else none.
  int data_parallel_size_local = -1;
  /// Which replica serves a request, by name (troupe/routing/routing_policy.hpp).
  std::string routing_policy = "prefix_affinity";
  /// vLLM's --kv-events-config: publish every replica's KV cache events for external routers.
  KvEventsConfig kv_events;
};

/// Called for every delta, on the scheduler actor's thread (as a step completes): must
/// not block, and should be quick, since the next step waits for it.
using OutputCallback = std::function<void(RequestOutput)>;

using StatsCallback = std::function<void(const StatsEvent&)>;

class Engine {
 public:
  /// In three parts: load the artifacts (plugins, platform, model file), start the
  /// ranks and size their KV cache (engine::plan_kv_cache), spawn the actors.
  static Result<std::unique_ptr<Engine>> start(EngineOptions options);
  ~Engine();  // aborts what is running and stops the actors
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queue a request; invalid ones (bad parameters, too long, queue full) fail here with the reason
  /// (engine::InputProcessor), and `refused_field`, when given, names the request field at fault
  /// ("" for none). Ones the scheduler refuses later end with finish reason error and that Status.
  Result<std::string> submit(GenerateRequest request, OutputCallback on_output, std::string* refused_field = nullptr);
  /// Abort a request: its blocks are freed at once and it ends with finish_reason "abort".
  void abort(const std::string& request_id);
  /// Blocking convenience: submit and wait for the finished output.
  Result<FinalOutput> generate(GenerateRequest request);

  /// C++ callback subscribers of stat events; returns an id for unsubscribe_stats.
  uint64_t subscribe_stats(StatsCallback callback);
  /// After it returns the callback is never called again.
  void unsubscribe_stats(uint64_t id);
  /// Actor subscribers (a stats_subscriber_actor, local or remote): actors/engine_caf.hpp.
  /// Publish the stat logger on host:port (CAF middleman; port 0 = any free
  /// port) behind a gate, so other processes can subscribe (`troupe stats
  /// --connect`, actors::connect_stats), with the engine's TLS when it has some. A
  /// non-loopback host needs a secret or TLS.
  /// Returns the port.
  Result<uint16_t> publish_stat_logger(uint16_t port, const std::string& host = "127.0.0.1",
                                       const std::string& secret = "");
  /// The actor system the engine runs in (yours, or the one it made).
  caf::actor_system& system();

  const EngineConfig& config() const;            // after the platform's check_and_update_config
  const ModelInfo& model_info() const;
  const tokenizer::Tokenizer& tokenizer() const;
  std::string served_model_name() const;
  /// Whether a request's "model" names the base model: empty, or any --served-model-name.
  bool serves_model(const std::string& name) const;
  /// A chat request's prompt text through the model's chat template (its own Jinja
  /// template, --chat-template's, the request's chat_template, or a built-in fallback);
  /// errors are invalid_argument (HTTP 400). continue_final_message: the prompt ends inside
  /// the final (assistant) message, which the model then continues (vLLM's option).
  Result<std::string> render_chat(const chat::ChatPromptRequest& request) const;
  /// render_chat for plain role/content messages.
  Result<std::string> apply_chat_template(const std::vector<chat::Message>& messages, bool add_generation_prompt,
                                          bool continue_final_message = false) const;
  /// Where the chat template came from ("GGUF tokenizer.chat_template", ...), or why there is none.
  std::string chat_template_origin() const;
  int64_t num_kv_blocks() const;
  /// False once a worker died or a step failed (with replicas: while none serves); the reason
  /// says why (each replica's, "replica N: ...").
  bool healthy() const;
  std::string unhealthy_reason() const;
  /// The replicas (config().parallel.data_parallel_size; 1 without data parallelism).
  int data_parallel_size() const;
  /// Each replica's health in index order: ok while it serves, else why not.
  std::vector<Status> replica_health() const;
  /// Prometheus text exposition of the engine's metrics (GET /metrics).
  std::string metrics_text() const;
  /// Sleep mode (vLLM's; needs config.model.enable_sleep_mode). Level 1 frees the ranks'
  /// device copies of the weights and the KV cache, keeping the weights in host memory;
  /// level 2 also lets the host drop the mapped weights. Refused while requests are
  /// unfinished; requests submitted while asleep wait for wake_up. Returns the resident
  /// bytes the ranks' processes freed.
  Result<int64_t> sleep(int level);
  /// Wakes the ranks: `tags` "weights" and/or "kv_cache" (empty: both). The engine steps
  /// again once both are awake; the prefix cache starts empty.
  Status wake_up(const std::vector<std::string>& tags = {});
  /// 0 when awake, else the level the engine sleeps at.
  int sleep_level() const;
  /// LoRA (needs config.lora.enable_lora): every rank reads the adapter file at `path` (on its
  /// own host) and checks it against the model; then requests may name it (GenerateRequest::
  /// lora_name). invalid_argument naming the problem for a bad file or a used name
  /// (engine::LoraRegistry).
  Result<LoraAdapterInfo> load_lora_adapter(const std::string& name, const std::string& path);
  /// not_found for an unknown name; unavailable while unfinished requests use it.
  Status unload_lora_adapter(const std::string& name);
  /// The loaded adapters, by name.
  std::vector<LoraAdapterInfo> lora_adapters() const;
  /// Most requests that ran in one step so far, and other totals (for --stats).
  int64_t max_running_requests() const;

 private:
  struct Impl;
  friend struct EngineInternals;  // actors/engine_caf.hpp's handles
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::engine
