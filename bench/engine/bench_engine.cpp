// troupe_bench_engine MODEL.gguf [--prompt-len 128] [--gen-len 128] [--concurrency 1,4,16,32]
// troupe_bench_engine --load-format dummy --model-shape llama-3.2-1b [--weight-type q8_0] [--seed 0] [...]
//   (random weights built in memory: the same model `troupe make-gguf` writes)
//   [--kv-cache-dtype auto|fp16|fp32] on either
//
// Total decode throughput of the actor engine for several numbers of
// concurrent requests (distinct random prompts, greedy, EOS ignored), and the
// share of wall time spent outside the model (actors, scheduling, sampling,
// detokenization). The reference is the same engine at concurrency 1 in the
// same run: the batching gain is throughput(C) / throughput(1).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

using troupe::engine::Engine;
using Clock = std::chrono::steady_clock;

namespace {

struct RunResult {
  int concurrency = 0;
  int64_t generated = 0;
  double decode_tps = 0;  // tokens/s once every request had its first token (all decoding)
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
  const char* usage =
      "usage: %s MODEL.gguf | --load-format dummy --model-shape NAME [--weight-type T] [--seed N]\n"
      "       [--prompt-len N] [--gen-len N] [--concurrency 1,4,16,32] [--kv-cache-dtype auto|fp16|fp32] [--threads N]\n";
  int prompt_len = 128, gen_len = 128, threads = 0;
  std::string kv_cache_dtype = "auto";
  std::vector<int> levels = {1, 4, 16, 32};
  troupe::engine::EngineOptions opts;
  auto& model = opts.config.model;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0) {
      model.model_path = flag;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      std::fprintf(stderr, usage, argv[0]);
      return 2;
    }
    std::string value = argv[++i];
    if (flag == "--prompt-len") prompt_len = std::atoi(value.c_str());
    else if (flag == "--gen-len") gen_len = std::atoi(value.c_str());
    else if (flag == "--threads") threads = std::atoi(value.c_str());
    else if (flag == "--kv-cache-dtype") kv_cache_dtype = value;
    else if (flag == "--load-format") model.load_format = value;
    else if (flag == "--model-shape") model.model_shape = value;
    else if (flag == "--weight-type") model.weight_type = value;
    else if (flag == "--seed") model.seed = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--concurrency") {
      levels.clear();
      std::stringstream ss(value);
      for (std::string item; std::getline(ss, item, ',');) levels.push_back(std::atoi(item.c_str()));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::fprintf(stderr, usage, argv[0]);
      return 2;
    }
  }
  if (model.model_path.empty() && model.load_format != "dummy") {
    std::fprintf(stderr, usage, argv[0]);
    return 2;
  }
  if (levels.empty() || *std::min_element(levels.begin(), levels.end()) < 1 || prompt_len < 1 || gen_len < 1) {
    std::fprintf(stderr, "--concurrency levels, --prompt-len and --gen-len must be at least 1\n");
    return 2;
  }
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

  std::printf("\nmodel %s: %d-token prompts, %d new tokens each, greedy\n", (*engine)->served_model_name().c_str(),
              prompt_len, gen_len);
  std::printf("%-12s %10s %14s %14s %9s %13s %14s\n", "concurrency", "wall (s)", "output tok/s", "decode tok/s",
              "vs C=1", "model share", "outside model");
  double base = 0;
  for (int c : levels) {
    auto r = run(**engine, c, prompt_len, gen_len, rng);
    double tps = static_cast<double>(r.generated) / r.wall_s;
    if (base == 0) base = r.decode_tps;
    double outside = std::max(0.0, 1.0 - r.model_s / r.wall_s);
    std::printf("%-12d %10.2f %14.1f %14.1f %8.2fx %12.1f%% %13.1f%%\n", c, r.wall_s, tps, r.decode_tps,
                r.decode_tps / base, 100.0 * r.model_s / r.wall_s, 100.0 * outside);
  }
  std::printf("\n'output tok/s' counts all generated tokens over the whole run (prefill included); 'decode tok/s'\n"
              "only the tokens after every request had its first one. 'vs C=1' compares decode tok/s.\n"
              "'outside model' = 1 - (time inside Worker::execute_model) / wall time: actors, scheduling,\n"
              "sampling and detokenization. References come from a side-by-side run (bench/), never from here.\n");
  return 0;
}
