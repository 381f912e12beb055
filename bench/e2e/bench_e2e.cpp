// troupe_bench_e2e: prefill and decode tokens/s of a model file through the
// active platform's worker, with the machine's streaming-read bandwidth
// measured in the same run and the fraction of the bandwidth bound reached
// (weight bytes read per token x tokens/s / bandwidth).
//
// bench/compare.sh runs it beside llama-bench: prefill of --prompt-tokens in
// one batch (llama-bench -p), and --decode-tokens single-token steps after a
// --decode-prompt token prompt (llama-bench -n starts at an empty context:
// --decode-prompt 1), with --json holding every repetition's figure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "kernels/cpu/bandwidth.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "troupe/log.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// One sequence in blocks 0.., tokens [pos, pos + ids.size()).
void fill(troupe::ForwardBatch& b, const std::vector<int32_t>& ids, int pos, int block_size) {
  const int n = static_cast<int>(ids.size());
  b.token_ids = ids;
  b.positions.resize(n);
  b.slot_mapping.resize(n);
  for (int i = 0; i < n; ++i) {
    b.positions[i] = pos + i;
    b.slot_mapping[i] = pos + i;
  }
  b.query_start = {0, n};
  b.seq_lens = {pos + n};
  b.block_tables.resize(1);
  b.block_tables[0].resize((pos + n + block_size - 1) / block_size);
  for (size_t i = 0; i < b.block_tables[0].size(); ++i) b.block_tables[0][i] = static_cast<int32_t>(i);
  b.logits_indices = {n - 1};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe end-to-end benchmark: prefill and decode tokens/s vs the bandwidth bound"};
  std::string model;
  int threads = 0, prompt_tokens = 512, decode_tokens = 128, repeats = 3, decode_prompt = 16, warmup = 0;
  std::string json_path;
  std::string kv_cache_dtype = "auto";
  app.add_option("model", model, "GGUF model (default: $TROUPE_TEST_MODEL)");
  app.add_option("--threads", threads, "compute threads (default: all cores)");
  app.add_option("--prompt-tokens", prompt_tokens, "prefill length (one batch)");
  app.add_option("--decode-tokens", decode_tokens, "decode steps");
  app.add_option("--repeats", repeats, "best of this many runs");
  troupe::EngineConfig config;
  app.add_option("--load-format", config.model.load_format, "auto (MODEL) or dummy (random weights, no file)");
  app.add_option("--model-shape", config.model.model_shape, "dummy: the model shape (llama-3.2-1b, ...)");
  app.add_option("--weight-type", config.model.weight_type, "dummy: the weight type (q8_0, q4_1, ...)");
  app.add_option("--seed", config.model.seed, "dummy: the weights' seed");
  app.add_option("--kv-cache-dtype", kv_cache_dtype, "auto, fp16 or fp32");
  app.add_option("--decode-prompt", decode_prompt, "prompt tokens before the timed decode steps (default 16)");
  app.add_option("--warmup", warmup, "untimed runs first (default 0)");
  app.add_option("--json", json_path, "also write every run's figures as JSON here");
  app.add_option("--device", config.device, "the platform: auto (default: one that can run the model), cpu, cuda, ...");
  CLI11_PARSE(app, argc, argv);
  const bool dummy = config.model.load_format == "dummy";
  if (!dummy && model.empty() && std::getenv("TROUPE_TEST_MODEL")) model = std::getenv("TROUPE_TEST_MODEL");
  if (!dummy && model.empty()) {
    std::fprintf(stderr, "give a model file (or set TROUPE_TEST_MODEL)\n");
    return 1;
  }
  if (prompt_tokens < 1 || decode_tokens < 1 || repeats < 1 || decode_prompt < 1 || warmup < 0) {
    std::fprintf(stderr, "--prompt-tokens, --decode-tokens, --repeats and --decode-prompt must be >= 1\n");
    return 2;
  }
  troupe::log::set_level(troupe::log::Level::warning);
  auto& host = troupe::plugin_host::PluginHost::instance();
  host.load_all();
  // Like the engine: automatic choice passes over a platform that cannot run the model.
  config.model.model_path = model;
  auto artifacts = troupe::engine::load_model_artifacts(config);
  if (!artifacts.ok()) {
    std::fprintf(stderr, "%s\n", artifacts.status().to_string().c_str());
    return 1;
  }
  troupe::plugin_host::PlatformRequest request;
  request.device = config.device;
  request.what = dummy ? "the dummy " + config.model.model_shape + " model" : model;
  request.can_serve = [&](const troupe::Platform& p) { return troupe::engine::verify_weight_types(p, *artifacts); };
  auto platform = host.activate_platform(request);
  if (!platform.ok()) {
    std::fprintf(stderr, "%s\n", platform.status().to_string().c_str());
    return 1;
  }
  config.parallel.num_threads = threads;
  config.cache.cache_dtype = kv_cache_dtype;
  config.scheduler.max_num_batched_tokens = std::max(prompt_tokens, 1);
  config.model.max_model_len = std::max(prompt_tokens, decode_prompt) + decode_tokens + 16;
  auto gen = troupe::generation::OfflineGenerator::create(**platform, config, model);
  if (!gen.ok()) {
    std::fprintf(stderr, "%s\n", gen.status().to_string().c_str());
    return 1;
  }
  troupe::Worker& worker = (*gen)->worker();
  const auto& info = (*gen)->model_info();
  const int bs = (*gen)->config().cache.block_size;
  const int n_threads = (*gen)->config().parallel.num_threads;
  troupe::ExecuteModelRequest req;

  std::vector<int32_t> prompt(prompt_tokens);
  for (int i = 0; i < prompt_tokens; ++i) prompt[i] = 1 + (i * 7919) % static_cast<int32_t>(info.vocab_size - 1);

  std::vector<int32_t> decode_ids(static_cast<size_t>(decode_prompt));
  for (int i = 0; i < decode_prompt; ++i) decode_ids[i] = 1 + (i * 7919) % static_cast<int32_t>(info.vocab_size - 1);
  std::vector<double> prefill_tps, decode_tps;
  for (int r = 0; r < warmup + repeats; ++r) {
    fill(req.batch, prompt, 0, bs);
    auto t0 = Clock::now();
    auto out = worker.execute_model(req);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
      return 1;
    }
    if (r >= warmup) prefill_tps.push_back(prompt_tokens / s);

    // Decode after a decode_prompt-token prompt, greedy, one token per step.
    fill(req.batch, decode_ids, 0, bs);
    out = worker.execute_model(req);
    int pos = decode_prompt;
    t0 = Clock::now();
    for (int i = 0; i < decode_tokens && out.ok(); ++i) {
      const auto& l = out->logits;
      const int32_t next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
      fill(req.batch, {next}, pos++, bs);
      out = worker.execute_model(req);
    }
    const double d = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
      return 1;
    }
    if (r >= warmup) decode_tps.push_back(decode_tokens / d);
  }
  const double best_prefill = *std::max_element(prefill_tps.begin(), prefill_tps.end());
  const double best_decode = *std::max_element(decode_tps.begin(), decode_tps.end());
  auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };

  troupe::kernels::cpu::ThreadPool pool(n_threads);
  const double bw = troupe::kernels::cpu::measure_read_bandwidth_gbs(&pool);
  const double bytes = static_cast<double>(info.weight_bytes);
  const double bound = bw * 1e9 / bytes;
  std::printf("model: %s (%.1f MB of weights read per token), %d threads\n",
              dummy ? (*gen)->config().model.served_model_name.c_str() : model.c_str(), bytes / 1e6, n_threads);
  std::printf("bandwidth: %.1f GB/s streaming read -> decode bound %.0f tok/s\n", bw, bound);
  std::printf("prefill %d tokens: %.1f tok/s (best of %d; mean %.1f)\n", prompt_tokens, best_prefill, repeats,
              mean(prefill_tps));
  std::printf("decode %d tokens: %.1f tok/s = %.0f%% of the bandwidth bound (best of %d; mean %.1f)\n", decode_tokens,
              best_decode, 100.0 * best_decode / bound, repeats, mean(decode_tps));
  if (!json_path.empty()) {
    nlohmann::json j = {{"model", model},
                        {"threads", n_threads},
                        {"prompt_tokens", prompt_tokens},
                        {"decode_tokens", decode_tokens},
                        {"decode_prompt", decode_prompt},
                        {"weight_bytes", info.weight_bytes},
                        {"read_bandwidth_gbs", bw},
                        {"prefill_tps", prefill_tps},
                        {"decode_tps", decode_tps}};
    std::ofstream f(json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
