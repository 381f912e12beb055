// Engine settings: the engine's own structs, outside the SDK and its fingerprint.
// Plugins see them only by name, through troupe/config_view.hpp: EngineConfig is a
// ConfigEditor, so Platform::check_and_update_config may change any setting
// (worker implementation, block size, graph mode, ...), as in vLLM, and
// ParallelConfig is a ConfigView of its own "parallel.*" settings, what the
// platform's communicator factories read. The names are engine_config.cpp's table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/config_view.hpp"

namespace troupe {

/// A model's sampling defaults (vLLM's "default sampling params" from the folder's
/// generation_config.json): what a request that does not set a field gets instead of vLLM's
/// default. Unset fields keep vLLM's defaults.
struct GenerationDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<int64_t> max_tokens;     // max_new_tokens: the default max_tokens (capped by the context)
  std::vector<int32_t> eos_token_ids;    // eos_token_id (one or a list): also stop generation
  std::string origin;                    // the file read, "" when none
  bool empty() const {
    return !temperature && !top_p && !min_p && !repetition_penalty && !top_k && !max_tokens && eos_token_ids.empty();
  }
};

struct ModelConfig {
  std::string model_path;          // a GGUF file, or a Hugging Face model folder ("auto" load format)
  /// vLLM's --load-format: "auto" reads model_path; "dummy" builds random weights of the
  /// named shape in memory (runtime/model_files/dummy), no file needed; the weights come from `seed`.
  std::string load_format = "auto";
  std::string model_shape;         // dummy: a named shape ("llama-3.2-1b", ...)
  std::string weight_type;         // dummy: the type of every matrix ("q8_0", ...); empty: q8_0
  std::string served_model_name;   // name in the API (the first of --served-model-name); default: the model path as given
  /// Every name the API accepts in "model" (vLLM's --served-model-name NAME [NAME...]); empty: served_model_name.
  std::vector<std::string> served_model_aliases;
  /// vLLM's --generation-config: "auto" reads the model folder's generation_config.json, "vllm"
  /// ignores it, any other value is a folder whose generation_config.json is read.
  std::string generation_config = "auto";
  GenerationDefaults generation_defaults;  // filled at load from that file
  std::string architecture;        // filled at load ("llama"), used by ModelRegistry
  int64_t max_model_len = 0;       // 0: the model's context length
  std::string dtype = "auto";      // activation/compute dtype request
  std::string quantization;        // weight quantization found in the file ("q4_1", ...)
  uint64_t seed = 0;                // sampling seeds of requests without one; dummy weights
  /// "generate" or "pooling" (vLLM's --runner); "auto": from the model. Set by the engine.
  std::string runner = "auto";
  /// Pooling runner: the model's default pooling ("mean", "cls", "last") and normalization.
  std::string pooling_type = "last";
  bool pooling_normalize = false;
  bool pooling_matryoshka = false;   // whether a request may keep fewer dimensions
  /// vLLM's --enable-sleep-mode: the engine may be put to sleep (Engine::sleep, POST /sleep).
  bool enable_sleep_mode = false;
  /// Sleep mode: a request that waits this long while the engine sleeps fails (503).
  double sleep_wait_timeout_s = 60;
  /// Logits processors applied to every step's logits before sampling, in this order
  /// (vLLM's --logits-processors): names in troupe/logits_processor.hpp's registry.
  std::vector<std::string> logits_processors;
};

struct CacheConfig {
  int block_size = 16;                   // tokens per KV block
  std::string cache_dtype = "auto";      // "auto" = what the platform prefers
  int64_t num_gpu_blocks_override = 0;   // >0: use exactly this many blocks
  int64_t kv_cache_memory_bytes = 0;     // >0: budget for the KV cache
  double memory_utilization = 0.9;       // of the device memory the platform reports
  bool enable_prefix_caching = true;
};

struct SchedulerConfig {
  int max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_queued_requests = 0;   // 0: unbounded
  /// The scheduling policy (vLLM's --scheduler-cls): a name in troupe/scheduler_policy.hpp's
  /// registry; "fcfs" is built in, general plugins register more.
  std::string scheduler_cls = "fcfs";
};

struct ParallelConfig final : ConfigView {
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;        // world size = tensor_parallel_size * pipeline_parallel_size
  /// Rendezvous id of the ranks' communicator, made once by the head with
  /// Platform::make_communicator_id and sent to every rank; empty for a world of 1.
  /// Global rank r is pipeline stage r / tensor_parallel_size, tensor rank r % tensor_parallel_size.
  std::string communicator_id;
  /// The address the node of rank 0 listens on for the ranks' communicator, when the ranks
  /// run on several hosts; empty: one host (the CPU platform then uses shared memory). Read
  /// by Platform::make_communicator_id, in rank 0's process.
  std::string communicator_host;
  /// A fresh secret the head makes for a world whose nodes it reaches over TLS alone (no
  /// cluster secret): sent to the nodes only over those TLS links, it is what the platform's
  /// own connections between ranks prove (the CPU platform's TCP collectives: an HMAC
  /// challenge per connection). Empty: the cluster secret (TROUPE_CLUSTER_SECRET_FILE).
  std::string communicator_secret;
  int num_threads = 0;                   // CPU compute threads; 0 = all cores
  std::string worker_cls;                // set by the platform
  /// vLLM's --enable-expert-parallel: a mixture-of-experts model's experts are split whole
  /// over the tensor parallel ranks of a stage (attention stays tensor parallel), instead of
  /// every expert's rows over them.
  bool enable_expert_parallel = false;
  /// Replicas of the model, each with world_size() ranks of its own (vLLM's
  /// --data-parallel-size); the head routes requests over them.
  int data_parallel_size = 1;
  int world_size() const { return tensor_parallel_size * pipeline_parallel_size; }

  /// The "parallel.*" settings by name.
  std::optional<std::string> get(std::string_view key) const override;
  std::vector<std::string> keys() const override;
};

struct CompilationConfig {
  bool enforce_eager = false;            // graph capture off when true
  std::string graph_mode = "none";       // set by the platform: "none", "cuda_graph", ...
};

/// LoRA adapters (vLLM's --enable-lora, --max-loras, --max-lora-rank).
struct LoraConfig {
  bool enable_lora = false;
  int max_loras = 1;        // distinct adapters in one step
  int max_lora_rank = 16;   // adapters of a larger rank are refused
};

/// Speculative decoding (vLLM's --speculative-config). Only the "ngram" method (prompt
/// lookup) is implemented: the drafter proposes up to num_speculative_tokens tokens that
/// followed the longest earlier occurrence of the sequence's last n tokens,
/// prompt_lookup_min <= n <= prompt_lookup_max; the target model verifies them in one step.
struct SpeculativeConfig {
  std::string method;                    // empty: speculative decoding is off
  int num_speculative_tokens = 0;
  int prompt_lookup_max = 0;
  int prompt_lookup_min = 0;
  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
};

/// Structured outputs (`troupe serve --structured-outputs-*`): the bounds of one grammar's
/// compile, applied where the API compiles it at admission and where the driver rank does.
struct StructuredOutputsConfig {
  double compile_timeout_s = 1.0;  // a schema or grammar that takes longer is refused, naming the limit
  int64_t max_memory_mib = 256;    // memory of one compiled grammar (its lazily built lexer included)
  /// Wall time of one token mask; longer fails that request alone, naming the limit (0: none).
  double mask_timeout_ms = 50;
};

struct EngineConfig final : ConfigEditor {
  /// The platform to run on (vLLM's --device): a platform plugin's name or device type
  /// ("cpu", "cuda"); "auto" lets the plugin host choose. After start-up it names the
  /// activated platform plugin, so every node activates the same one.
  std::string device = "auto";
  ModelConfig model;
  CacheConfig cache;
  SchedulerConfig scheduler;
  ParallelConfig parallel;
  CompilationConfig compilation;
  LoraConfig lora;
  SpeculativeConfig speculative;
  StructuredOutputsConfig structured_outputs;
  /// Free-form settings a platform or plugin may add or read, by name "extra.NAME".
  std::map<std::string, std::string> extra;

  /// Every setting by name ("device", "cache.block_size", "extra.NAME", ...).
  std::optional<std::string> get(std::string_view key) const override;
  std::vector<std::string> keys() const override;
  /// Any named setting; "extra.NAME" adds NAME. A world_size or another derived name is
  /// not a setting.
  Status set(std::string_view key, std::string_view value) override;
};

}  // namespace troupe
