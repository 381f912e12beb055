// troupe_bench_engine MODEL.gguf [--prompt-len 128] [--gen-len 128] [--concurrency 1,4,16,32]
//                               [--threads N] [--json FILE]
// troupe_bench_engine --load-format dummy --model-shape llama-3.2-1b [--weight-type q8_0] [--seed 0] [...]
//   (random weights built in memory: the same model `troupe make-gguf` writes)
//   [--kv-cache-dtype auto|fp16|fp32] [--device auto|cpu|cuda] [--hbm-gbps 4800] [--prefill-len 512] on either
//
// Total decode throughput of the actor engine for several numbers of
// concurrent requests (distinct random prompts, greedy, EOS ignored), and the
// share of wall time spent outside the model (actors, scheduling, sampling,
// detokenization). The reference is the same engine at concurrency 1 in the
// same run: the batching gain is throughput(C) / throughput(1). Prefill tok/s
// is every prompt token over the time until the last request's first token;
// --prefill-len N adds one request of N prompt tokens alone (prefill only).
// With --hbm-gbps B, "roofline" is decode tok/s over the weight-streaming
// bound C * B / (bytes of weights read per step): KV cache reads are left out,
// so the bound is optimistic and the fraction a lower bound.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actors/engine.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"

using troupe::engine::Engine;
using Clock = std::chrono::steady_clock;

namespace {

struct RunResult {
  int concurrency = 0;
  int64_t generated = 0;
  double decode_tps = 0;  // tokens/s once every request had its first token (all decoding)
  double prefill_tps = 0; // prompt tokens / seconds until every request had its first token
  double wall_s = 0;
  double model_s = 0;
  double step_s = 0;
  int64_t steps = 0;
};

RunResult run(Engine& engine, int concurrency, int prompt_len, int gen_len, std::mt19937& rng) {
  const auto& tok = engine.tokenizer();
  std::uniform_int_distribution<int32_t> pick(std::min<int32_t>(300, tok.vocab_size() - 1), tok.vocab_size() - 1);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  RunResult r;
  r.concurrency = concurrency;
  std::atomic<int64_t> generated{0};
  std::vector<Clock::time_point> token_times;   // every generated token's arrival
  std::vector<Clock::time_point> first_token(concurrency);
  double model_s = 0, step_s = 0;
  int64_t steps = 0;
  auto sub = engine.subscribe_stats([&](const troupe::engine::StatsEvent& ev) {
    std::lock_guard lock(mu);
    model_s += ev.scheduler.model_seconds;
    step_s += ev.scheduler.step_seconds;
    if (ev.scheduler.model_seconds > 0) ++steps;
  });
  auto start = Clock::now();
  for (int i = 0; i < concurrency; ++i) {
    troupe::engine::GenerateRequest req;
    for (int t = 0; t < prompt_len; ++t) req.prompt_token_ids.push_back(pick(rng));
    req.sampling.temperature = 0;
    req.sampling.max_tokens = gen_len;
    req.sampling.ignore_eos = true;
    auto id = engine.submit(std::move(req), [&, i](troupe::engine::RequestOutput out) {
      generated += static_cast<int64_t>(out.new_token_ids.size());
      std::lock_guard lock(mu);
      auto now = Clock::now();
      if (first_token[i] == Clock::time_point{} && !out.new_token_ids.empty()) first_token[i] = now;
      token_times.insert(token_times.end(), out.new_token_ids.size(), now);
      if (out.finished) {
        ++finished;
        cv.notify_all();
      }
    });
    if (!id) {
      std::fprintf(stderr, "submit failed: %s\n", id.status().to_string().c_str());
      std::exit(1);
    }
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return finished == concurrency; });
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  engine.unsubscribe_stats(sub);
  std::lock_guard lock(mu);
  r.generated = generated.load();
  // Decode phase: from the moment the last request got its first token to the end.
  auto decode_start = *std::max_element(first_token.begin(), first_token.end());
  const double prefill_s = std::chrono::duration<double>(decode_start - start).count();
  r.prefill_tps = prefill_s > 0 ? static_cast<double>(concurrency) * prompt_len / prefill_s : 0.0;
  auto decode_end = *std::max_element(token_times.begin(), token_times.end());
  int64_t decode_tokens = 0;
  for (auto t : token_times) decode_tokens += t > decode_start;
  double decode_s = std::chrono::duration<double>(decode_end - decode_start).count();
  r.decode_tps = decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0.0;
  r.model_s = model_s;
  r.step_s = step_s;
  r.steps = steps;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe_bench_engine: decode throughput of the actor engine under concurrency"};
  std::string model, levels_arg = "1,4,16,32", json_path, kv_cache_dtype = "auto";
  double hbm_gbps = 0;
  int prompt_len = 128, gen_len = 128, threads = 0, prefill_len = 0;
  troupe::engine::EngineOptions opts;
  app.add_option("model", model, "GGUF model (none with --load-format dummy)");
  app.add_option("--load-format", opts.config.model.load_format, "auto (MODEL) or dummy (random weights, no file)");
  app.add_option("--model-shape", opts.config.model.model_shape, "dummy: the model shape (llama-3.2-1b, ...)");
  app.add_option("--weight-type", opts.config.model.weight_type, "dummy: the weight type (q8_0, q4_1, ...)");
  app.add_option("--seed", opts.config.model.seed, "dummy: the weights' seed");
  app.add_option("--kv-cache-dtype", kv_cache_dtype, "auto, fp16 or fp32");
  app.add_option("--prompt-len", prompt_len, "prompt tokens per request (default 128)");
  app.add_option("--gen-len", gen_len, "new tokens per request (default 128)");
  app.add_option("--concurrency", levels_arg, "concurrent requests, comma-separated (default 1,4,16,32)");
  app.add_option("--threads", threads, "CPU compute threads (default: all cores)");
  app.add_option("--device", opts.config.device, "the platform: auto (default), cpu, cuda, ...");
  app.add_flag("--enforce-eager", opts.config.compilation.enforce_eager, "capture no CUDA graphs (cuda)");
  app.add_option("--gpu-memory-utilization", opts.config.cache.memory_utilization,
                 "share of the device's memory for weights, activations and KV cache (cuda; default 0.9)");
  app.add_option("--max-num-batched-tokens", opts.config.scheduler.max_num_batched_tokens,
                 "most tokens in one step (default 2048)");
  app.add_option("--prefill-len", prefill_len, "also time one request of this many prompt tokens alone (0: no)");
  app.add_option("--hbm-gbps", hbm_gbps, "memory bandwidth in GB/s: adds the weight-streaming roofline fraction");
  app.add_option("--json", json_path, "also write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> levels;
  std::stringstream ss(levels_arg);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 4096) {
      std::fprintf(stderr, "--concurrency: '%s' is not a number from 1 to 4096\n", item.c_str());
      return 2;
    }
    levels.push_back(static_cast<int>(v));
  }
  if (levels.empty() || prompt_len < 1 || gen_len < 1 || threads < 0 || prefill_len < 0) {
    std::fprintf(stderr, "--concurrency needs a level; --prompt-len and --gen-len must be >= 1\n");
    return 2;
  }
  if (model.empty() && opts.config.model.load_format != "dummy") {
    std::fprintf(stderr, "give a model file, or --load-format dummy --model-shape NAME\n");
    return 2;
  }
  opts.config.model.model_path = model;
  opts.config.parallel.num_threads = threads;
  opts.config.scheduler.max_num_seqs = *std::max_element(levels.begin(), levels.end());
  opts.config.cache.enable_prefix_caching = false;
  opts.config.cache.cache_dtype = kv_cache_dtype;
  opts.config.parallel.num_threads = threads;  // distinct prompts anyway; keep the comparison plain
  opts.stat_log_interval_s = 0;
  auto engine = Engine::start(std::move(opts));
  if (!engine) {
    std::fprintf(stderr, "engine failed to start: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  std::mt19937 rng(1234);
  run(**engine, 2, 16, 4, rng);  // warm-up: threads, caches, page faults

  const auto weight_bytes = static_cast<double>((*engine)->model_info().weight_bytes);
  std::printf("\nmodel %s on %s: %d-token prompts, %d new tokens each, greedy, %s threads, %.1f MiB of weights "
              "read per step\n",
              (*engine)->served_model_name().c_str(), (*engine)->config().device.c_str(), prompt_len, gen_len,
              threads > 0 ? std::to_string(threads).c_str() : "all", weight_bytes / (1 << 20));
  std::printf("%-12s %10s %14s %14s %14s %9s %13s %14s %9s\n", "concurrency", "wall (s)", "output tok/s",
              "prefill tok/s", "decode tok/s", "vs C=1", "model share", "outside model", "roofline");
  double base = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (int c : levels) {
    auto r = run(**engine, c, prompt_len, gen_len, rng);
    double tps = static_cast<double>(r.generated) / r.wall_s;
    if (base == 0) base = r.decode_tps;
    double outside = std::max(0.0, 1.0 - r.model_s / r.wall_s);
    // Decode reads every weight once per step for c tokens: at most c * bandwidth / weight bytes tok/s.
    const double roofline =
        hbm_gbps > 0 && weight_bytes > 0 ? r.decode_tps / (c * hbm_gbps * 1e9 / weight_bytes) : 0.0;
    std::printf("%-12d %10.2f %14.1f %14.1f %14.1f %8.2fx %12.1f%% %13.1f%% %8.1f%%\n", c, r.wall_s, tps,
                r.prefill_tps, r.decode_tps, base > 0 ? r.decode_tps / base : 0.0, 100.0 * r.model_s / r.wall_s, 100.0 * outside,
                100.0 * roofline);
    rows.push_back({{"concurrency", c},
                    {"wall_s", r.wall_s},
                    {"generated", r.generated},
                    {"output_tps", tps},
                    {"decode_tps", r.decode_tps},
                    {"prefill_tps", r.prefill_tps},
                    {"roofline_fraction", roofline},
                    {"model_share", r.model_s / r.wall_s},
                    {"outside_model", outside}});
  }
  nlohmann::json prefill = nullptr;
  if (prefill_len > 0) {
    // One request alone; its second token is generated so the first one's arrival is timed.
    auto r = run(**engine, 1, prefill_len, 2, rng);
    std::printf("prefill of %d tokens alone: %.1f tok/s (%.1f ms to the first token)\n", prefill_len, r.prefill_tps,
                r.prefill_tps > 0 ? 1e3 * prefill_len / r.prefill_tps : 0.0);
    prefill = {{"prompt_len", prefill_len}, {"prefill_tps", r.prefill_tps}};
  }
  std::printf("\n'output tok/s' counts all generated tokens over the whole run (prefill included); 'decode tok/s'\n"
              "only the tokens after every request had its first one. 'vs C=1' compares decode tok/s.\n"
              "'outside model' = 1 - (time inside Worker::execute_model) / wall time: actors, scheduling,\n"
              "sampling and detokenization. References come from a side-by-side run (bench/), never from here.\n");
  if (!json_path.empty()) {
    nlohmann::json j = {{"model", model},         {"device", (*engine)->config().device},
                        {"threads", threads},     {"prompt_len", prompt_len},
                        {"gen_len", gen_len},     {"weight_bytes_per_step", weight_bytes},
                        {"hbm_gbps", hbm_gbps},   {"levels", rows},
                        {"prefill", prefill}};
    std::ofstream f(json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
