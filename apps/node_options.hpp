// The flags `troupe serve` and `troupe generate` share for where ranks run:
// --device, and for ranks on other processes and nodes --tensor-parallel-size,
// --pipeline-parallel-size, --nodes and --secret-file.
#pragma once

#include <CLI/CLI.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "actors/gate_actor.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

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
  auto secret = actors::read_secret_file(path);
  if (!secret) return secret.status();
  *out = *secret;
  return {};
}

}  // namespace troupe::apps
