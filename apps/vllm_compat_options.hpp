// `vllm serve` flags that troupe accepts only to answer them: each either has its vLLM
// meaning here (a no-op troupe already matches, with a warning when it is one) or stops
// start-up with one line naming the flag and why. Flags troupe implements for real
// (--max-model-len, --port, ...) are declared with the options they set, not here.
// README's "vLLM flags" table lists them all.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "apps/quantization_option.hpp"
#include "troupe/log.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

struct VllmCompatOptions {
  std::string dtype = "auto";
  std::string quantization;
  bool enable_chunked_prefill = true;
  bool trust_remote_code = false;
  std::string generation_config;
  std::string tokenizer;
  std::string pooler_config;
  std::string revision;
  std::string download_dir;
  bool disable_log_requests = false;
  std::string uvicorn_log_level;
  std::optional<double> swap_space;
  bool disable_custom_all_reduce = false;
  std::string ssl_keyfile;
  std::string ssl_certfile;
};

inline void add_vllm_compat_options(CLI::App& sub, VllmCompatOptions* o) {
  const char* group = "vLLM compatibility (accepted or refused by name)";
  sub.add_option("--dtype", o->dtype, "auto only: troupe computes in the types of the GGUF file and the platform")
      ->group(group);
  sub.add_option("--quantization,-q", o->quantization, kQuantizationHelp)->group(group);
  sub.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", o->enable_chunked_prefill,
               "on only: long prefills are always split by --max-num-batched-tokens")
      ->group(group);
  sub.add_flag("--trust-remote-code", o->trust_remote_code, "accepted, no effect: troupe runs no code from models")
      ->group(group);
  sub.add_option("--generation-config", o->generation_config,
                 "auto (default): a model folder's generation_config.json sets the sampling defaults; vllm: "
                 "vLLM's defaults; a folder: its generation_config.json")
      ->group(group);
  sub.add_option("--tokenizer", o->tokenizer, "the model itself only: troupe reads the tokenizer from the model")
      ->group(group);
  sub.add_option("--pooler-config,--override-pooler-config", o->pooler_config,
                 "refused: the pooling comes from the model (a folder's 1_Pooling/config.json)")
      ->group(group);
  sub.add_option("--revision", o->revision, "refused: troupe serves local files")->group(group);
  sub.add_option("--download-dir", o->download_dir, "refused: troupe serves local files")->group(group);
  sub.add_flag("--disable-log-requests", o->disable_log_requests,
               "accepted: requests are not logged unless --log-requests")
      ->group(group);
  sub.add_option("--uvicorn-log-level", o->uvicorn_log_level,
                 "accepted: critical|error|warning|info|debug|trace set the log level (as TROUPE_LOG_LEVEL)")
      ->group(group);
  sub.add_option("--swap-space", o->swap_space, "accepted, no effect: preempted requests are recomputed, not swapped")
      ->group(group);
  sub.add_flag("--disable-custom-all-reduce", o->disable_custom_all_reduce,
               "accepted, no effect: troupe has no custom all-reduce")
      ->group(group);
  sub.add_option("--ssl-keyfile", o->ssl_keyfile, "refused: troupe serves plain HTTP (put TLS in a proxy)")
      ->group(group);
  sub.add_option("--ssl-certfile", o->ssl_certfile, "refused: troupe serves plain HTTP (put TLS in a proxy)")
      ->group(group);
}

/// invalid_argument with one line naming the flag and why for a flag troupe cannot honour;
/// logs a warning for each flag accepted without effect. `model`: the served path.
inline Status apply_vllm_compat_options(const VllmCompatOptions& o, const std::string& model) {
  auto refuse = [](const std::string& flag, const std::string& why) { return invalid_argument(flag + ": " + why); };
  if (o.dtype != "auto")
    return refuse("--dtype " + o.dtype,
                  "troupe computes in the weight types of the GGUF file and the platform's kernels; only auto is "
                  "accepted");
  // --quantization becomes the engine's ModelConfig::quantization: a registered load-time method.
  TROUPE_RETURN_IF_ERROR(check_quantization_option(o.quantization));
  if (!o.enable_chunked_prefill)
    return refuse("--no-enable-chunked-prefill",
                  "troupe always splits long prefills by --max-num-batched-tokens");
  if (o.trust_remote_code) TROUPE_LOG_WARNING("--trust-remote-code has no effect: troupe runs no code from models");
  // --generation-config (auto, vllm or a folder) is the engine's ModelConfig::generation_config.
  if (std::error_code ec; !o.generation_config.empty() && o.generation_config != "auto" &&
                          o.generation_config != "vllm" && !std::filesystem::is_directory(o.generation_config, ec))
    return refuse("--generation-config " + o.generation_config,
                  "not a folder (auto, vllm or a folder holding generation_config.json)");
  if (!o.tokenizer.empty() && o.tokenizer != model)
    return refuse("--tokenizer " + o.tokenizer, "troupe reads the tokenizer from the model file or folder");
  if (!o.pooler_config.empty())
    return refuse("--pooler-config " + o.pooler_config,
                  "not implemented yet: troupe pools as the model says (a sentence-transformers folder's "
                  "1_Pooling/config.json, a GGUF's pooling_type); edit that file to change it");
  if (!o.revision.empty()) return refuse("--revision " + o.revision, "troupe serves local files; nothing is downloaded");
  if (!o.download_dir.empty())
    return refuse("--download-dir " + o.download_dir, "troupe serves local files; nothing is downloaded");
  if (!o.uvicorn_log_level.empty()) {
    log::Level level;
    const std::string name = o.uvicorn_log_level == "critical" ? "error" : o.uvicorn_log_level;
    if (!log::parse_level(name, &level))
      return refuse("--uvicorn-log-level " + o.uvicorn_log_level,
                    "expected critical, error, warning, info, debug or trace");
    log::set_level(level);
  }
  if (o.swap_space)
    TROUPE_LOG_WARNING("--swap-space has no effect: troupe recomputes preempted requests instead of swapping");
  if (o.disable_custom_all_reduce) TROUPE_LOG_WARNING("--disable-custom-all-reduce has no effect in troupe");
  if (!o.ssl_keyfile.empty() || !o.ssl_certfile.empty())
    return refuse(o.ssl_keyfile.empty() ? "--ssl-certfile" : "--ssl-keyfile",
                  "troupe serves plain HTTP; terminate TLS in a proxy in front of it");
  return {};
}

}  // namespace troupe::apps
