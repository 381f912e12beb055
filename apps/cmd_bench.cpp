// `troupe bench serve ...`: benchmark a running OpenAI-compatible server
// (troupe, vLLM, llama-server) the way `vllm bench serve` does.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "apps/bench/bench_serve.hpp"
#include "apps/command.hpp"

namespace troupe::apps {
namespace {

const CommandRegistration kRegistration("bench", "Benchmarks (bench serve: load-test an OpenAI server)", [](CLI::App& sub) {
  sub.require_subcommand(1);
  CLI::App* serve = sub.add_subcommand("serve", "Stream random text prompts to /v1/completions and measure latency/throughput");
  auto o = std::make_shared<bench::BenchOptions>();
  auto rate = std::make_shared<std::string>("inf");
  auto seed = std::make_shared<uint64_t>(0);
  serve->add_option("--base-url", o->base_url, "Server URL (default http://127.0.0.1:8000)");
  serve->add_option("--model", o->model, "Model name (default: the first of /v1/models)");
  serve->add_option("--num-prompts", o->num_prompts, "Requests to send (default 64)");
  serve->add_option("--max-concurrency", o->max_concurrency, "Requests in flight at most (default: unbounded)");
  serve->add_option("--request-rate", *rate, "Requests per second, Poisson arrivals; inf: all at once (default)");
  serve->add_option("--random-input-len", o->random_input_len,
                    "Prompt tokens per request, as random words sized by a probe request (default 128)");
  serve->add_option("--random-output-len", o->random_output_len, "Generated tokens per request (default 128)");
  CLI::Option* seed_opt =
      serve->add_option("--seed", *seed, "Random seed for prompts and arrivals (default: a fresh one every run)");
  serve->add_option("--result-file", o->result_file, "Write the results as JSON here");
  serve->add_option("--api-key", o->api_key, "Bearer key (default: $TROUPE_API_KEY)");
  serve->add_option("--timeout", o->timeout_s, "Seconds one request may take (default 600)");
  return [o, rate, seed, seed_opt]() {
    if (seed_opt->count() > 0) o->seed = *seed;
    if (*rate == "inf" || *rate == "infinity") {
      o->request_rate = std::numeric_limits<double>::infinity();
    } else {
      char* end = nullptr;
      o->request_rate = std::strtod(rate->c_str(), &end);
      if (!end || *end != '\0' || !(o->request_rate > 0) || !std::isfinite(o->request_rate)) {
        std::fprintf(stderr, "troupe bench serve: error: --request-rate must be a positive number or inf\n");
        return 1;
      }
    }
    if (o->api_key.empty())
      if (const char* k = std::getenv("TROUPE_API_KEY"); k && *k) o->api_key = k;
    auto summary = bench::run_bench_serve(*o);
    if (!summary.ok()) {
      std::fprintf(stderr, "troupe bench serve: error: %s\n", summary.status().message().c_str());
      return 1;
    }
    if (summary->failed > 0) {
      std::fprintf(stderr, "troupe bench serve: error: %d of %d requests failed (first: %s)\n", summary->failed,
                   summary->failed + summary->completed, summary->first_error.c_str());
      return 1;
    }
    return 0;
  };
});

}  // namespace
}  // namespace troupe::apps
