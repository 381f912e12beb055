// troupe_bench_e2e: prefill and decode tokens/s of a model file through the
// active platform's worker, with the machine's streaming-read bandwidth
// measured in the same run and the fraction of the bandwidth bound reached
// (weight bytes read per token x tokens/s / bandwidth).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cpu/bandwidth.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/generation/offline_generator.hpp"
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
  int threads = 0, prompt_tokens = 512, decode_tokens = 128, repeats = 3;
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
  CLI11_PARSE(app, argc, argv);
  const bool dummy = config.model.load_format == "dummy";
  if (!dummy && model.empty() && std::getenv("TROUPE_TEST_MODEL")) model = std::getenv("TROUPE_TEST_MODEL");
  if (!dummy && model.empty()) {
    std::fprintf(stderr, "give a model file (or set TROUPE_TEST_MODEL)\n");
    return 1;
  }
  troupe::log::set_level(troupe::log::Level::warning);
  auto& host = troupe::plugin_host::PluginHost::instance();
  host.load_all();
  auto platform = host.activate_platform();
  if (!platform.ok()) {
    std::fprintf(stderr, "%s\n", platform.status().to_string().c_str());
    return 1;
  }
  config.parallel.num_threads = threads;
  config.cache.cache_dtype = kv_cache_dtype;
  config.scheduler.max_num_batched_tokens = std::max(prompt_tokens, 1);
  config.model.max_model_len = prompt_tokens + decode_tokens + 16;
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

  double best_prefill = 0, best_decode = 0;
  for (int r = 0; r < repeats; ++r) {
    fill(req.batch, prompt, 0, bs);
    auto t0 = Clock::now();
    auto out = worker.execute_model(req);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
      return 1;
    }
    best_prefill = std::max(best_prefill, prompt_tokens / s);

    // Decode after a 16-token prompt, greedy, one token per step.
    std::vector<int32_t> ids(prompt.begin(), prompt.begin() + std::min(16, prompt_tokens));
    fill(req.batch, ids, 0, bs);
    out = worker.execute_model(req);
    int pos = static_cast<int>(ids.size());
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
    best_decode = std::max(best_decode, decode_tokens / d);
  }

  troupe::kernels::cpu::ThreadPool pool(n_threads);
  const double bw = troupe::kernels::cpu::measure_read_bandwidth_gbs(&pool);
  const double bytes = static_cast<double>(info.weight_bytes);
  const double bound = bw * 1e9 / bytes;
  std::printf("model: %s (%.1f MB of weights read per token), %d threads\n",
              dummy ? (*gen)->config().model.served_model_name.c_str() : model.c_str(), bytes / 1e6, n_threads);
  std::printf("bandwidth: %.1f GB/s streaming read -> decode bound %.0f tok/s\n", bw, bound);
  std::printf("prefill %d tokens: %.1f tok/s\n", prompt_tokens, best_prefill);
  std::printf("decode %d tokens: %.1f tok/s = %.0f%% of the bandwidth bound\n", decode_tokens, best_decode,
              100.0 * best_decode / bound);
  return 0;
}
