// The flags `troupe serve` and `troupe generate` share for where ranks run
// (PlacementOptions): --threads, --kv-cache-dtype, --device,
// --gpu-memory-utilization, --enforce-eager, and for ranks on other processes
// and nodes --tensor-parallel-size, --pipeline-parallel-size, --enable-expert-parallel,
// --nodes and --secret-file, --tls-cert, --tls-key, --tls-ca.
#pragma once

#include <CLI/CLI.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "actors/gate_actor.hpp"
#include "apps/tls_options.hpp"
#include "net/handshake.hpp"  // read_secret_file
#include "runtime/config/engine_config.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

/// Where and how the ranks run, as `serve` and `generate` both take it.
struct PlacementOptions {
  int threads = 0;                    // CPU compute threads; 0: all cores
  std::string kv_cache_dtype = "auto";
  std::string device;                 // empty: TROUPE_DEVICE, else automatic
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  bool enable_expert_parallel = false;
  std::string nodes;                  // HOST:PORT[,HOST:PORT...]
  std::string secret_file;            // the nodes' secret
  net::TlsFiles tls;               // mutual TLS on the links to the nodes and the stats port
};

/// --device (vLLM's flag): the platform to run on; TROUPE_DEVICE when not given.
/// --gpu-memory-utilization (vLLM's): the share of device memory the engine may use.
inline void add_device_option(CLI::App& sub, std::string* device, double* memory_utilization) {
  sub.add_option("--device", *device,
                 "Platform to run on: a platform plugin's name or device type (cpu, cuda, ...); default auto, "
                 "or TROUPE_DEVICE when set");
  sub.add_option("--gpu-memory-utilization", *memory_utilization,
                 "Share of the device's memory for weights, activations and KV cache, for platforms that size "
                 "the KV cache from device memory (default 0.9; the CPU platform uses TROUPE_CPU_KVCACHE_SPACE)")
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))
      ->check(CLI::Validator([](std::string& v) { return std::stod(v) > 0 ? "" : "must be greater than 0"; },
                             "", "positive"));
}

/// --enforce-eager (vLLM's): no graph capture (CUDA graphs of decode steps on cuda).
inline void add_enforce_eager_option(CLI::App& sub, bool* enforce_eager) {
  sub.add_flag("--enforce-eager", *enforce_eager,
               "Run every step eagerly: capture no CUDA graphs of decode steps (platforms that capture them)");
}

inline void add_parallel_options(CLI::App& sub, int* tensor_parallel_size, int* pipeline_parallel_size,
                                 std::string* nodes, std::string* secret_file) {
  sub.add_option("--tensor-parallel-size", *tensor_parallel_size,
                 "Ranks that split each layer (attention heads, MLP) (default 1)");
  sub.add_option("--pipeline-parallel-size", *pipeline_parallel_size,
                 "Pipeline stages that split the layers (default 1)");
  sub.add_option("--nodes", *nodes,
                 "Worker nodes (troupe node) HOST:PORT[,HOST:PORT...]; default: local node processes when "
                 "there are several ranks");
  sub.add_option("--secret-file", *secret_file, "File whose first line is the secret the nodes ask for");
}

/// --threads, --kv-cache-dtype, the device options, --enforce-eager and the parallel options.
inline void add_placement_options(CLI::App& sub, PlacementOptions* p) {
  sub.add_option("--threads", p->threads, "CPU compute threads (default: all cores)");
  sub.add_option("--kv-cache-dtype", p->kv_cache_dtype,
                 "KV cache element type: auto (the platform's choice: fp16 on cpu and cuda), fp16, bfloat16 "
                 "(cuda) or fp32")
      ->check(CLI::IsMember({"auto", "fp16", "bfloat16", "bf16", "fp32"}));
  add_device_option(sub, &p->device, &p->gpu_memory_utilization);
  add_enforce_eager_option(sub, &p->enforce_eager);
  add_parallel_options(sub, &p->tensor_parallel_size, &p->pipeline_parallel_size, &p->nodes, &p->secret_file);
  sub.add_flag("--enable-expert-parallel", p->enable_expert_parallel,
               "Mixture-of-experts models: split the experts whole over the tensor parallel ranks (expert "
               "parallelism; attention stays tensor parallel) instead of every expert's rows");
  add_tls_options(sub, &p->tls);
}

/// The engine config's share of `p` (the nodes and the secret are the executor's).
inline void apply_placement(const PlacementOptions& p, EngineConfig* c) {
  c->parallel.num_threads = p.threads;
  c->cache.cache_dtype = p.kv_cache_dtype;
  c->parallel.tensor_parallel_size = p.tensor_parallel_size;
  c->parallel.pipeline_parallel_size = p.pipeline_parallel_size;
  c->parallel.enable_expert_parallel = p.enable_expert_parallel;
  c->device = p.device;
  c->cache.memory_utilization = p.gpu_memory_utilization;
  c->compilation.enforce_eager = p.enforce_eager;
}

/// "a:1,b:2" → {"a:1", "b:2"}, each checked as HOST:PORT.
inline Status parse_nodes(const std::string& text, std::vector<std::string>* out) {
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    std::string host;
    uint16_t port = 0;
    TROUPE_RETURN_IF_ERROR(actors::parse_host_port(item, "--nodes", &host, &port));
    out->push_back(item);
  }
  return {};
}

/// The secret of `path`, or none when no file is given.
inline Status read_optional_secret(const std::string& path, std::string* out) {
  if (path.empty()) return {};
  auto secret = net::read_secret_file(path);
  if (!secret) return secret.status();
  *out = *secret;
  return {};
}

}  // namespace troupe::apps
